"""Systems under test: the generator protocol, adapters, context and the attempt runner."""

from __future__ import annotations

from pathlib import Path

from sqleval_pipeline.configs import LoadedConfig
from sqleval_pipeline.generation.base import (
    Example,
    GenerationContext,
    GenerationOutput,
    Generator,
    ProviderError,
)
from sqleval_pipeline.generation.anthropic_gen import AnthropicGenerator
from sqleval_pipeline.generation.baseline import BaselineGenerator
from sqleval_pipeline.generation.callable_gen import CallableGenerator
from sqleval_pipeline.generation.recorded import RecordedGenerator

__all__ = ["Example", "GenerationContext", "GenerationOutput", "Generator", "ProviderError",
           "make_generator"]


def make_generator(loaded: LoadedConfig, catalog, glossary, root: Path) -> Generator:
    """Build the generator a configuration names. Credentials and endpoints come from the
    environment variables the configuration names; a missing one fails with a sentence that
    says which variable to set."""
    cfg = loaded.config
    s = cfg.generator
    if s.kind == "baseline":
        return BaselineGenerator(catalog, glossary if cfg.context.curation else None,
                                 name=f"baseline:{cfg.name}")
    if s.kind == "anthropic":
        return AnthropicGenerator(s, timeout_s=cfg.timeout_s)
    if s.kind == "openai":
        # an HTTP client stack (httpx, ~0.1 s): only for a configuration of this kind
        from sqleval_pipeline.generation.openai_gen import OpenAIGenerator

        return OpenAIGenerator(s, timeout_s=cfg.timeout_s)
    if s.kind == "http":
        # an HTTP client stack (httpx, ~0.1 s): only for a configuration of this kind
        from sqleval_pipeline.generation.http_gen import HttpGenerator

        return HttpGenerator(s, timeout_s=cfg.timeout_s)
    if s.kind == "recorded":
        return RecordedGenerator(s, root=root)
    if s.kind == "callable":
        return CallableGenerator(s)
    if s.kind == "cortex_analyst":
        # an HTTP client stack (httpx, ~0.1 s): only for a configuration of this kind
        from sqleval_pipeline.generation.cortex_analyst import CortexAnalystGenerator

        return CortexAnalystGenerator(s, timeout_s=cfg.timeout_s)
    if s.kind == "genie":
        # an HTTP client stack (httpx, ~0.1 s): only for a configuration of this kind
        from sqleval_pipeline.generation.genie import GenieGenerator

        return GenieGenerator(s, timeout_s=cfg.timeout_s)
    raise ValueError(f"unknown generator kind {s.kind!r}")
