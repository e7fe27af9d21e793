"""The one small protocol every system under test implements.

Given a case's question and its context, a generator returns SQL or a refusal (with a
reason), plus usage (tokens, cost if known, latency) and the raw response for audit.
Failures to obtain an answer at all — the provider is down, rate-limited, timed out or sent
something unreadable — raise :class:`ProviderError`; the attempt runner retries the retryable
ones with exponential backoff (honouring ``retry_after``) and records a final ERROR attempt,
never a WRONG one.

:class:`ProviderError` lives in :mod:`sqleval_pipeline.providers.errors` (the LLM judge raises
it too); it is re-exported here, so ``from sqleval_pipeline.generation.base import
ProviderError`` keeps working.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from sqleval_pipeline.providers.errors import ProviderError
from sqleval_pipeline.pipeline.records import Usage

__all__ = ["Example", "GenerationContext", "GenerationOutput", "Generator", "ProviderError"]


class Example(BaseModel):
    """A dev-split golden triple shown to the system as a few-shot example."""

    case_id: str
    question: str
    sql: str


class GenerationContext(BaseModel):
    """Everything a system under test may see for one attempt."""

    case_id: str
    run_index: int
    question: str
    dialect: str = "duckdb"
    as_of: dt.date
    schema_context: str = Field(description="DDL, column descriptions, sample values of allowlisted tables")
    glossary_context: str | None = Field(default=None, description="retrieved glossary entries (curation on)")
    examples: list[Example] = Field(default_factory=list)
    prompt: str | None = Field(default=None, description="the rendered prompt (model-backed generators)")


class GenerationOutput(BaseModel):
    kind: Literal["sql", "refusal"]
    sql: str | None = None
    refusal_reason: str | None = None
    usage: Usage | None = None
    raw_response: str | None = None
    model: str | None = None
    temperature: float | None = None
    temperature_settable: bool | None = Field(
        default=None, description="False when the API has no temperature (e.g. Anthropic 2.14)"
    )


@runtime_checkable
class Generator(Protocol):
    """A system under test. ``name`` is recorded on every attempt."""

    name: str

    def generate(self, ctx: GenerationContext) -> GenerationOutput: ...

    def close(self) -> None: ...
