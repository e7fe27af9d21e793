"""A model writes the question for a proposed query (``sqleval golden propose -c CONFIG``).

Only configurations whose generator is a model (``anthropic``, ``openai``) describe queries;
any other kind (the baseline, recorded answers, a team's service) keeps the template's
question. The model gets the SQL, the served schema of its table, the first rows of its
result, the as-of date and the template's wording, and answers ``{"question": "..."}``
through the provider clients the generators use (:mod:`sqleval_pipeline.providers`), with
the configuration's retries. A call that still fails keeps the template's question: the
proposal is not lost, and the reviewer sees whose words it has (``provenance.author``).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from pydantic import BaseModel, Field

from sqleval_pipeline.configs import LoadedConfig
from sqleval_pipeline.providers import ProviderError, call_with_retries
from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.generation._common import extract_json_object
from sqleval_pipeline.providers.anthropic import anthropic_client, no_parsed_output, parse_mapping_errors
from sqleval_pipeline.providers.env import env_value, is_local_url

MODEL_KINDS = ("anthropic", "openai")
PREVIEW_ROWS = 5

INSTRUCTIONS = """You write evaluation questions for a text-to-SQL benchmark.
Below is a SQL query over an analytics warehouse. Write the one question, as a business user
would ask it, whose exact answer is this query's result. Say every filter, value and time
window the query applies (in words, not column names; dates as calendar dates or periods),
and the ordering or number of rows when it has them. Do not mention tables, columns or SQL.
Today is {as_of} (the data's as-of date).

Schema:
{schema}

SQL:
{sql}

First rows of its result:
{preview}

A template's wording, to improve on: {draft}

Reply with JSON only: {{"question": "<the question>"}}"""


class WrittenQuestion(BaseModel):
    question: str = Field(description="the question the SQL answers, in a user's words")


def prompt(*, sql: str, draft: str, schema: str, preview: ResultSet, as_of: dt.date) -> str:
    rows = [dict(zip(preview.columns, r, strict=False)) for r in preview.rows[:PREVIEW_ROWS]]
    return INSTRUCTIONS.format(as_of=as_of.isoformat(), schema=schema or "(not shown)",
                               sql=sql, draft=draft,
                               preview=json.dumps(rows, default=str, ensure_ascii=False))


class ModelWriter:
    """Describes queries with the configuration's model; ``write`` never raises for the
    provider (``failures`` counts the calls that fell back to the template)."""

    def __init__(self, loaded: LoadedConfig):
        cfg = loaded.config
        self.settings = cfg.generator
        self.timeout_s = cfg.timeout_s
        self.max_retries = cfg.max_retries
        self.name = f"{self.settings.kind}:{self.settings.model}"
        self.failures: list[str] = []
        self._call = self._anthropic() if self.settings.kind == "anthropic" else self._openai()

    def write(self, *, sql: str, draft: str, schema: str, preview: ResultSet,
              as_of: dt.date) -> str:
        text = prompt(sql=sql, draft=draft, schema=schema, preview=preview, as_of=as_of)
        try:
            question, _retries = call_with_retries(lambda: self._call(text),
                                                   max_retries=self.max_retries)
        except ProviderError as exc:
            self.failures.append(f"{exc.code}: {exc.message}")
            return draft
        question = " ".join(str(question or "").split())
        return question if len(question) >= 3 else draft

    def close(self) -> None:
        closer = getattr(self, "_client", None)
        if closer is not None:
            closer.close()

    # -- providers -----------------------------------------------------------------------

    def _anthropic(self):
        s = self.settings
        self._client = anthropic_client(
            env_value(s.api_key_env), timeout_s=self.timeout_s, base_url=s.base_url,
            missing_key_message=f"describing proposals with {self.name} needs an API key: "
                                f"set {s.api_key_env}")

        def call(text: str) -> str:
            request: dict[str, Any] = {"model": s.model, "max_tokens": s.max_tokens,
                                       "messages": [{"role": "user", "content": text}],
                                       "output_format": WrittenQuestion}
            if s.thinking != "disabled":
                request["thinking"] = {"type": "adaptive"}
            message = parse_mapping_errors(self._client, request, timeout_s=self.timeout_s,
                                           credential_hint=f"the key in {s.api_key_env}",
                                           subject="the model")
            if message.parsed_output is None:
                raise no_parsed_output("the model returned no question", message.stop_reason,
                                       None)
            return message.parsed_output.question

        return call

    def _openai(self):
        # an HTTP client stack (httpx, ~0.1 s): only when an OpenAI-compatible model writes the questions
        from sqleval_pipeline.generation.openai_gen import DEFAULT_BASE_URL, LOCAL_PLACEHOLDER_KEY
        from sqleval_pipeline.providers.http import create_chat_completion, openai_client

        s = self.settings
        base_url = (s.base_url or env_value(s.base_url_env) or DEFAULT_BASE_URL).rstrip("/")
        key = env_value(s.api_key_env)
        if not key:
            if not is_local_url(base_url):
                raise ProviderError("missing_credentials", f"describing proposals with "
                                    f"{self.name} needs an API key: set {s.api_key_env}")
            key = LOCAL_PLACEHOLDER_KEY
        self._client = openai_client(key, base_url=base_url, timeout_s=self.timeout_s)

        def call(text: str) -> str:
            params: dict[str, Any] = {"model": s.model, "max_tokens": s.max_tokens,
                                      "temperature": s.temperature,
                                      "messages": [{"role": "user", "content": text}]}
            if s.seed is not None:
                params["seed"] = s.seed
            if s.json_mode:
                params["response_format"] = {"type": "json_object"}
            completion = create_chat_completion(self._client, params, base_url=base_url,
                                                timeout_s=self.timeout_s, credential_hint=None)
            content = completion.choices[0].message.content if completion.choices else None
            obj = extract_json_object(content or "")
            if not isinstance(obj, dict) or not isinstance(obj.get("question"), str):
                raise ProviderError("malformed_response", "the model's answer has no "
                                    '{"question": ...} object', retryable=True)
            return obj["question"]

        return call


def model_writer(loaded: LoadedConfig | None) -> ModelWriter | None:
    """The writer of a model configuration; None for any other kind (template questions).
    Raises :class:`ProviderError` (``missing_credentials``) before any call is made."""
    if loaded is None or loaded.config.generator.kind not in MODEL_KINDS:
        return None
    return ModelWriter(loaded)


__all__ = ["MODEL_KINDS", "ModelWriter", "WrittenQuestion", "model_writer", "prompt"]
