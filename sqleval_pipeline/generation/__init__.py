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

__all__ = ["Example", "GenerationContext", "GenerationOutput", "Generator", "ProviderError",
           "make_generator"]


def make_generator(loaded: LoadedConfig, catalog, glossary, root: Path) -> Generator:
    """Build the generator a configuration names. Credentials and endpoints come from the
    environment variables the configuration names; a missing one fails with a sentence that
    says which variable to set."""
    cfg = loaded.config
    s = cfg.generator
    if s.kind == "baseline":
        from sqleval_pipeline.generation.baseline import BaselineGenerator

        return BaselineGenerator(catalog, glossary if cfg.context.curation else None,
                                 name=f"baseline:{cfg.name}")
    if s.kind == "anthropic":
        from sqleval_pipeline.generation.anthropic_gen import AnthropicGenerator

        return AnthropicGenerator(s, timeout_s=cfg.timeout_s)
    if s.kind == "openai":
        from sqleval_pipeline.generation.openai_gen import OpenAIGenerator

        return OpenAIGenerator(s, timeout_s=cfg.timeout_s)
    if s.kind == "http":
        from sqleval_pipeline.generation.http_gen import HttpGenerator

        return HttpGenerator(s, timeout_s=cfg.timeout_s)
    if s.kind == "recorded":
        from sqleval_pipeline.generation.recorded import RecordedGenerator

        return RecordedGenerator(s, root=root)
    if s.kind == "callable":
        from sqleval_pipeline.generation.callable_gen import CallableGenerator

        return CallableGenerator(s)
    if s.kind == "cortex_analyst":
        from sqleval_pipeline.generation.cortex_analyst import CortexAnalystGenerator

        return CortexAnalystGenerator(s, timeout_s=cfg.timeout_s)
    if s.kind == "genie":
        from sqleval_pipeline.generation.genie import GenieGenerator

        return GenieGenerator(s, timeout_s=cfg.timeout_s)
    raise ValueError(f"unknown generator kind {s.kind!r}")
