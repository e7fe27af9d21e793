"""Helpers shared by the generator adapters: answer interpretation, prompts, setup errors.

Nothing here talks to a provider; the adapters (``anthropic_gen``, ``openai_gen``,
``http_gen``, ``recorded``, ``callable_gen``) build on these. Provider error handling — the
:class:`~sqleval_pipeline.providers.errors.ProviderError` codes, HTTP status mapping,
``retry-after`` parsing, raw-response capping, environment lookup — lives in
:mod:`sqleval_pipeline.providers` (shared with the LLM judge); those names are re-exported
here so existing imports from ``generation._common`` keep working.

>>> from sqleval_pipeline.providers import errors
>>> map_http_status is errors.map_http_status and truncate_raw is errors.truncate_raw
True

>>> interpret_answer({"sql": "SELECT 1", "refusal": None})
('sql', 'SELECT 1', None)
>>> interpret_answer({"kind": "refusal", "refusal_reason": "no salary data"})
('refusal', None, 'no salary data')
>>> extract_json_object('Sure!\\n```json\\n{"sql": "SELECT 2"}\\n```')
{'sql': 'SELECT 2'}
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from sqleval_pipeline.configs import ConfigError
from sqleval_pipeline.generation.base import GenerationContext
from sqleval_pipeline.providers.env import env_value, is_local_url  # noqa: F401  (re-export)
from sqleval_pipeline.providers.errors import (  # noqa: F401  (re-export)
    MAX_RAW_CHARS,
    ProviderError,
    map_http_status,
    parse_retry_after,
    truncate_raw,
)

NO_REASON = "no reason given"


class GeneratorSetupError(ConfigError):
    """A generator cannot be built from its configuration (bad target, unreadable file).

    A :class:`~sqleval_pipeline.configs.ConfigError`, so the CLI reports it like any other
    configuration mistake; the message names the file, line and field where it can.
    """


# --------------------------------------------------------------------------- answers

_FENCE_RE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.S)


def extract_json_object(text: str) -> Any | None:
    """The JSON object in a model's text, tolerating prose and Markdown fences; None if none.

    Tries, in order: the whole text, each fenced block (```json … ``` or ``` … ```), then the
    first balanced ``{…}`` span that parses.

    >>> extract_json_object('{"sql": "SELECT 1"}')
    {'sql': 'SELECT 1'}
    >>> extract_json_object('The answer is {"refusal": "no such table"} as requested.')
    {'refusal': 'no such table'}
    >>> extract_json_object("SELECT 1") is None
    True
    """
    if not text:
        return None
    candidates = [text.strip()] + [m.group(1).strip() for m in _FENCE_RE.finditer(text)]
    for candidate in candidates:
        if not candidate:
            continue
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def interpret_answer(obj: Any) -> tuple[str, str | None, str | None]:
    """``(kind, sql, refusal_reason)`` from an answer object; ValueError when it is neither.

    Accepts ``{"sql": ..., "refusal": ...}`` and ``{"kind", "sql", "refusal_reason"}``. An
    explicit ``kind`` decides; otherwise a refusal (a reason string, or ``true``) wins over
    SQL, since the system said it declines. Empty SQL without a refusal is not an answer.

    >>> interpret_answer({"sql": None, "refusal": True})
    ('refusal', None, 'no reason given')
    >>> interpret_answer({"sql": "  "})
    Traceback (most recent call last):
    ...
    ValueError: the answer has neither SQL nor a refusal (keys: sql)
    """
    if not isinstance(obj, Mapping):
        raise ValueError(f"the answer is a JSON {type(obj).__name__}, not an object")
    kind = obj.get("kind")
    sql = obj.get("sql")
    refusal = obj.get("refusal", obj.get("refusal_reason"))
    if refusal is None and "refusal_reason" in obj:
        refusal = obj.get("refusal_reason")
    if sql is not None and not isinstance(sql, str):
        raise ValueError(f"'sql' is a {type(sql).__name__}, not a string")
    sql = sql.strip() if isinstance(sql, str) else None
    reason = _reason(refusal)
    if kind is not None and kind not in ("sql", "refusal"):
        raise ValueError(f"'kind' is {kind!r}; expected 'sql' or 'refusal'")
    if kind == "refusal" or (kind is None and reason is not None):
        return "refusal", None, reason or NO_REASON
    if sql:
        return "sql", sql, None
    keys = ", ".join(sorted(map(str, obj.keys()))) or "none"
    raise ValueError(f"the answer has neither SQL nor a refusal (keys: {keys})")


def _reason(refusal: Any) -> str | None:
    """A refusal field's reason: None when it does not refuse."""
    if refusal is None or refusal is False:
        return None
    if refusal is True:
        return NO_REASON
    if isinstance(refusal, str):
        return refusal.strip() or None
    return json.dumps(refusal, default=str)


def default_prompt(ctx: GenerationContext) -> str:
    """A plain prompt for contexts that carry no rendered ``prompt`` (the template's shape).

    >>> import datetime as dt
    >>> p = default_prompt(GenerationContext(case_id="q1", run_index=0, question="How many?",
    ...                    as_of=dt.date(2025, 6, 30), schema_context="CREATE TABLE t(x INT);"))
    >>> "Question: How many?" in p and "2025-06-30" in p
    True
    """
    parts = [
        f"Answer the question with one {ctx.dialect} SELECT statement over the tables below, "
        f"or refuse when they cannot answer it. Today is {ctx.as_of.isoformat()}.",
        "Schema:\n" + ctx.schema_context,
    ]
    if ctx.glossary_context:
        parts.append("Business glossary (authoritative definitions):\n" + ctx.glossary_context)
    if ctx.examples:
        parts.append("Examples:\n" + "\n".join(f"Q: {e.question}\nSQL: {e.sql}" for e in ctx.examples))
    parts.append(f"Question: {ctx.question}")
    parts.append('Answer with JSON only: {"kind": "sql", "sql": "<one SELECT statement>", '
                 '"refusal_reason": null} or {"kind": "refusal", "sql": null, '
                 '"refusal_reason": "<why it cannot be answered>"}.')
    return "\n\n".join(parts)


def prompt_of(ctx: GenerationContext) -> str:
    """The rendered prompt of the attempt, or :func:`default_prompt` when none was rendered."""
    return ctx.prompt if ctx.prompt else default_prompt(ctx)
