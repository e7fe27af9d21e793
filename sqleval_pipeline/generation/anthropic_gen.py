"""Claude through the ``anthropic`` SDK (2.14): ``messages.parse`` with a pydantic output model.

The model is pinned by the configuration; the answer is validated by the SDK against
:class:`ClaudeAnswer` (``kind`` = ``"sql"`` | ``"refusal"``, ``sql``, ``refusal_reason``).
Anthropic 2.14 has no temperature parameter, so every output records ``temperature=None``
and ``temperature_settable=False`` rather than pretending.

The SDK's own retries are off (``max_retries=0``): the attempt runner retries, through
:func:`~sqleval_pipeline.providers.retry.call_with_retries`, so a retry is visible and
counted. The client is built, and SDK exceptions become :class:`ProviderError` codes, in
:mod:`sqleval_pipeline.providers.anthropic` (shared with the LLM judge).

>>> from sqleval_pipeline.configs import AnthropicSettings
>>> gen = AnthropicGenerator(AnthropicSettings(model="claude-sonnet-4-5-20250929"),
...                          api_key="sk-ant-...")                         # doctest: +SKIP
>>> out = gen.generate(ctx)                                                 # doctest: +SKIP
>>> out.kind, out.sql, out.temperature_settable                             # doctest: +SKIP
('sql', 'SELECT ...', False)
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, Field

from sqleval_pipeline.configs import AnthropicSettings
from sqleval_pipeline.generation._common import NO_REASON, prompt_of
from sqleval_pipeline.generation.base import GenerationContext, GenerationOutput
from sqleval_pipeline.providers.anthropic import (  # noqa: F401  (parse_mapping_errors: re-export)
    anthropic_client,
    no_parsed_output,
    parse_mapping_errors,
)
from sqleval_pipeline.providers.env import env_value
from sqleval_pipeline.providers.errors import ProviderError, truncate_raw
from sqleval_pipeline.pipeline.records import Usage


class ClaudeAnswer(BaseModel):
    """The structured answer Claude is asked for (``output_format`` of ``messages.parse``)."""

    kind: Literal["sql", "refusal"] = Field(description="'sql' to answer, 'refusal' to decline")
    sql: str | None = Field(default=None, description="one SELECT statement when kind is 'sql'")
    refusal_reason: str | None = Field(default=None, description="why, when kind is 'refusal'")


class AnthropicGenerator:
    """A Claude model answering through ``messages.parse``.

    Args:
        settings: the configuration's ``generator`` block (model, max_tokens, thinking,
            api_key_env, base_url).
        api_key: overrides the key read from ``settings.api_key_env``.
        timeout_s: per-call timeout in seconds (the configuration's ``timeout_s``).

    Raises:
        ProviderError: ``missing_credentials`` when no key is given nor found in the
            environment — at construction, before any case is attempted.
    """

    def __init__(self, settings: AnthropicSettings, *, api_key: str | None = None,
                 timeout_s: float = 60) -> None:
        self.settings = settings
        self.name = f"anthropic:{settings.model}"
        self.timeout_s = timeout_s
        self._client = anthropic_client(
            api_key or env_value(settings.api_key_env), timeout_s=timeout_s,
            base_url=settings.base_url,
            missing_key_message=(
                f"the anthropic generator needs an API key: set {settings.api_key_env} "
                f"(settings.api_key_env) in the environment, e.g. "
                f"`export {settings.api_key_env}=sk-ant-...`"),
        )

    def generate(self, ctx: GenerationContext) -> GenerationOutput:
        """Ask the model for the case; SQL or a refusal, or a :class:`ProviderError`."""
        request: dict[str, Any] = {
            "model": self.settings.model,
            "max_tokens": self.settings.max_tokens,
            "messages": [{"role": "user", "content": prompt_of(ctx)}],
            "output_format": ClaudeAnswer,
        }
        if self.settings.thinking != "disabled":
            request["thinking"] = {"type": "adaptive"}
        started = time.perf_counter()
        message = parse_mapping_errors(self._client, request, timeout_s=self.timeout_s,
                                       credential_hint=f"the key in {self.settings.api_key_env}",
                                       subject="the model")
        latency_ms = (time.perf_counter() - started) * 1000.0
        return self._output(message, latency_ms)

    def close(self) -> None:
        """Close the SDK's HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> AnthropicGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------

    def _output(self, message: Any, latency_ms: float) -> GenerationOutput:
        raw = truncate_raw(message.to_json(indent=None))
        usage = Usage(
            input_tokens=getattr(message.usage, "input_tokens", None),
            output_tokens=getattr(message.usage, "output_tokens", None),
            latency_ms=round(latency_ms, 3),
        )
        common = {"usage": usage, "raw_response": raw, "model": message.model or self.settings.model,
                  "temperature": None, "temperature_settable": False}
        answer: ClaudeAnswer | None = message.parsed_output
        if answer is None:
            if message.stop_reason == "refusal":
                return GenerationOutput(kind="refusal", refusal_reason="the model declined "
                                        "(stop_reason=refusal)", **common)
            raise no_parsed_output("the model returned no JSON answer", message.stop_reason, raw)
        if answer.kind == "refusal":
            reason = (answer.refusal_reason or "").strip() or NO_REASON
            return GenerationOutput(kind="refusal", refusal_reason=reason, **common)
        sql = (answer.sql or "").strip()
        if not sql:
            raise ProviderError("malformed_response", "the model answered kind 'sql' with no SQL",
                                retryable=True, raw_response=raw)
        return GenerationOutput(kind="sql", sql=sql, **common)
