"""The one provider error type, its codes, and the HTTP status mapping every wire format shares.

Both the systems under test (``sqleval_pipeline.generation``) and the LLM judge
(``sqleval_pipeline.judging``) raise :class:`ProviderError` when no answer could be obtained,
with one of these codes:

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

The per-wire-format mappings build on this module: ``providers.anthropic`` (the Anthropic
SDK) and ``providers.http`` (OpenAI-compatible chat completions, plain JSON over HTTP).

>>> map_http_status(429, "slow down", retry_after=2.0).retryable
True
>>> map_http_status(401, "bad key").code
'auth_error'
>>> str(map_http_status(503, "overloaded", provider="anthropic"))
'server_error: anthropic answered HTTP 503: overloaded'
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
from collections.abc import Mapping

from sqleval_pipeline.errors import SqlevalError

__all__ = [
    "ERROR_CODES", "MAX_RAW_CHARS", "ProviderError", "body_text", "map_http_status",
    "parse_retry_after", "short_message", "timeout_error", "truncate_raw", "unreachable_error",
]

#: every :attr:`ProviderError.code`, in the order of the module table
ERROR_CODES = (
    "rate_limited", "server_error", "provider_timeout", "unreachable", "malformed_response",
    "auth_error", "bad_request", "missing_credentials", "harness_error",
)

#: cap on the raw response text kept for audit (a runaway body must not bloat the records)
MAX_RAW_CHARS = 200_000


class ProviderError(SqlevalError):
    """No answer could be obtained; ``code`` is a readable reason code.

    Codes: ``rate_limited``, ``server_error``, ``provider_timeout``, ``unreachable``,
    ``malformed_response``, ``auth_error``, ``missing_credentials``, ``bad_request``,
    ``harness_error``.

    >>> err = ProviderError("rate_limited", "429", retryable=True, retry_after=3)
    >>> str(err), err.retryable, err.retry_after, err.retries
    ('rate_limited: 429', True, 3, 0)
    """

    def __init__(self, code: str, message: str, *, retryable: bool = False,
                 retry_after: float | None = None, raw_response: str | None = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after
        self.raw_response = raw_response
        #: retries spent before giving up (set by the retry loop)
        self.retries = 0


# --------------------------------------------------------------------------- raw responses


def truncate_raw(text: str | None) -> str | None:
    """Keep at most :data:`MAX_RAW_CHARS` characters of a raw response (marked when cut).

    >>> truncate_raw("short"), truncate_raw(None)
    ('short', None)
    >>> truncate_raw("x" * (MAX_RAW_CHARS + 5)).endswith("[truncated 5 chars]")
    True
    """
    if text is None or len(text) <= MAX_RAW_CHARS:
        return text
    return text[:MAX_RAW_CHARS] + f"\n…[truncated {len(text) - MAX_RAW_CHARS} chars]"


def body_text(body: object) -> str | None:
    """An SDK error's decoded body as text: a string as is, anything else as JSON.

    >>> body_text({"error": {"type": "overloaded_error"}}), body_text("<html>"), body_text(None)
    ('{"error": {"type": "overloaded_error"}}', '<html>', None)
    """
    if body is None:
        return None
    if isinstance(body, str):
        return body
    try:
        return json.dumps(body, default=str)
    except (TypeError, ValueError):
        return str(body)


def short_message(exc: Exception, limit: int = 500) -> str:
    """An exception's text on one line, at most ``limit`` characters (cut text ends with …).

    >>> short_message(ValueError("bad\\n   json"))
    'bad json'
    """
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "…"


# --------------------------------------------------------------------------- HTTP


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
    """The :class:`ProviderError` for an HTTP error status (see the module table).

    >>> err = map_http_status(403, "forbidden", credential_hint="the key in MY_KEY")
    >>> err.code, err.retryable, err.message
    ('auth_error', False, 'provider answered HTTP 403: forbidden (check the key in MY_KEY)')
    >>> [map_http_status(s, "").code for s in (408, 409, 400, 404)]
    ['provider_timeout', 'server_error', 'bad_request', 'bad_request']
    """
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


# --------------------------------------------------------------------------- transport


def timeout_error(where: str, timeout_s: float) -> ProviderError:
    """The retryable ``provider_timeout`` for a call to ``where`` that took over ``timeout_s``.

    >>> str(timeout_error("http://127.0.0.1:8080/sql", 2.5))
    'provider_timeout: http://127.0.0.1:8080/sql did not answer within 2.5 s'
    """
    return ProviderError("provider_timeout", f"{where} did not answer within {timeout_s:g} s",
                         retryable=True)


def unreachable_error(where: str, reason: object) -> ProviderError:
    """The retryable ``unreachable`` for a connection to ``where`` that failed with ``reason``.

    >>> str(unreachable_error("http://vllm:8000/v1", "connection refused"))
    'unreachable: cannot reach http://vllm:8000/v1: connection refused'
    """
    return ProviderError("unreachable", f"cannot reach {where}: {reason}", retryable=True)
