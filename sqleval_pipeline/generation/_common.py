"""Helpers shared by the generator adapters: error mapping, answer interpretation, env lookup.

Nothing here talks to a provider; the adapters (``anthropic_gen``, ``openai_gen``,
``http_gen``, ``recorded``, ``callable_gen``) build on these so that every system under test
maps failures onto the same :class:`~sqleval_pipeline.generation.base.ProviderError` codes:

====================  ==========  ===================================================
code                  retryable   when
====================  ==========  ===================================================
rate_limited          yes         HTTP 429 (``retry_after`` from ``retry-after``)
server_error          yes         HTTP 5xx, 409 (conflict/lock), a callable crashed
provider_timeout      yes         the call timed out (client timeout, HTTP 408)
unreachable           yes         connection refused/reset, DNS failure
malformed_response    yes         the body or the model's answer did not parse
auth_error            no          HTTP 401/403
bad_request           no          other HTTP 4xx (bad model id, bad parameters)
missing_credentials   no          the key/endpoint is not configured in the environment
harness_error         no          the harness cannot answer (e.g. no recorded answer)
====================  ==========  ===================================================

>>> map_http_status(429, "slow down", retry_after=2.0).retryable
True
>>> map_http_status(401, "bad key").code
'auth_error'
>>> interpret_answer({"sql": "SELECT 1", "refusal": None})
('sql', 'SELECT 1', None)
>>> interpret_answer({"kind": "refusal", "refusal_reason": "no salary data"})
('refusal', None, 'no salary data')
>>> extract_json_object('Sure!\\n```json\\n{"sql": "SELECT 2"}\\n```')
{'sql': 'SELECT 2'}
"""

from __future__ import annotations

import datetime as dt
import email.utils
import ipaddress
import json
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from sqleval_pipeline.configs import ConfigError
from sqleval_pipeline.generation.base import GenerationContext, ProviderError

#: cap on the raw response text kept for audit (a runaway body must not bloat the records)
MAX_RAW_CHARS = 200_000

NO_REASON = "no reason given"


class GeneratorSetupError(ConfigError):
    """A generator cannot be built from its configuration (bad target, unreadable file).

    A :class:`~sqleval_pipeline.configs.ConfigError`, so the CLI reports it like any other
    configuration mistake; the message names the file, line and field where it can.
    """


# --------------------------------------------------------------------------- environment


def env_value(name: str | None) -> str | None:
    """The stripped value of environment variable ``name``; None when unset, empty or no name."""
    if not name:
        return None
    value = os.environ.get(name, "").strip()
    return value or None


def is_local_url(url: str) -> bool:
    """True for endpoints on this machine or a private network (no API key expected).

    Loopback and private/link-local addresses, ``localhost``, single-label host names (a
    Docker/Kubernetes service such as ``vllm``) and ``.local``/``.internal``/``.lan`` names.

    >>> is_local_url("http://127.0.0.1:8000/v1"), is_local_url("http://ollama:11434/v1")
    (True, True)
    >>> is_local_url("https://api.openai.com/v1")
    False
    """
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    if not host:
        return False
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal", ".lan")):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host
    return ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_unspecified


# --------------------------------------------------------------------------- errors


def parse_retry_after(headers: Mapping[str, str] | None, *,
                      now: dt.datetime | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date).

    >>> parse_retry_after({"retry-after": "1.5"})
    1.5
    >>> parse_retry_after({"retry-after-ms": "250"})
    0.25
    >>> parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"},
    ...                   now=dt.datetime(2015, 10, 21, 7, 28, 0, tzinfo=dt.timezone.utc))
    10.0
    >>> parse_retry_after({}) is None
    True
    """
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if value >= 0:
                return value
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
        return value if value >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    now = now or dt.datetime.now(dt.timezone.utc)
    return max(0.0, (when - now).total_seconds())


def map_http_status(status: int, message: str, *, retry_after: float | None = None,
                    raw_response: str | None = None, provider: str = "provider",
                    credential_hint: str | None = None) -> ProviderError:
    """The :class:`ProviderError` for an HTTP error status (see the module table)."""
    detail = f"{provider} answered HTTP {status}: {message}"
    if status == 429:
        wait = f"; retry after {retry_after:g} s" if retry_after is not None else ""
        return ProviderError("rate_limited", detail + wait, retryable=True,
                             retry_after=retry_after, raw_response=raw_response)
    if status == 408:
        return ProviderError("provider_timeout", detail, retryable=True,
                             retry_after=retry_after, raw_response=raw_response)
    if status >= 500 or status == 409:
        return ProviderError("server_error", detail, retryable=True, retry_after=retry_after,
                             raw_response=raw_response)
    if status in (401, 403):
        hint = f" (check {credential_hint})" if credential_hint else ""
        return ProviderError("auth_error", detail + hint, raw_response=raw_response)
    return ProviderError("bad_request", detail, raw_response=raw_response)


def truncate_raw(text: str | None) -> str | None:
    """Keep at most :data:`MAX_RAW_CHARS` characters of a raw response (marked when cut)."""
    if text is None or len(text) <= MAX_RAW_CHARS:
        return text
    return text[:MAX_RAW_CHARS] + f"\n…[truncated {len(text) - MAX_RAW_CHARS} chars]"


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
