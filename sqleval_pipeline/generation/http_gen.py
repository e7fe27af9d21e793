"""A team's own text-to-SQL service over HTTP: POST the question, read SQL/refusal from its JSON.

The request body is ``{<question_field>: question, **extra_body, "case_id": ..., "as_of":
"YYYY-MM-DD"}`` (the question, case id and as-of date win over ``extra_body`` keys of the same
name). Headers are ``settings.headers`` plus ``Authorization: <value of auth_header_env>``.

The answer is read by dotted paths into the response JSON: ``settings.sql_path`` (default
``sql``) and ``settings.refusal_path`` (default ``refusal``); integer segments index lists,
e.g. ``choices.0.sql``. A truthy refusal wins; otherwise non-empty SQL is the answer; a
present but empty/null SQL with no refusal is a refusal ("the service returned no SQL"); a
missing SQL path is a ``malformed_response``. Transport failures and error statuses become
:class:`ProviderError` codes in :mod:`sqleval_pipeline.providers.http` (plain JSON over HTTP).

Tokens are recorded when the response reports them in a ``usage`` object — at the top level,
or beside the SQL (the object ``sql_path`` points into) — as ``input_tokens`` /
``output_tokens`` or ``prompt_tokens`` / ``completion_tokens`` (integers >= 0); otherwise they
stay None (:func:`reported_tokens`).

>>> get_path({"choices": [{"sql": "SELECT 1"}]}, "choices.0.sql")
'SELECT 1'
>>> get_path({"a": {"b": None}}, "a.b") is None, get_path({"a": 1}, "a.b") is MISSING
(True, True)
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlsplit

import httpx2

from sqleval_pipeline.configs import HttpSettings
from sqleval_pipeline.generation._common import NO_REASON
from sqleval_pipeline.generation.base import GenerationContext, GenerationOutput
from sqleval_pipeline.providers.env import env_value
from sqleval_pipeline.providers.errors import ProviderError
from sqleval_pipeline.providers.http import http_client, read_json_response, send_json
from sqleval_pipeline.pipeline.records import Usage


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: returned by :func:`get_path` when the path does not exist in the document
MISSING: Any = _Missing()


def get_path(document: Any, path: str) -> Any:
    """The value at a dotted ``path`` (``a.b``, ``choices.0.sql``); :data:`MISSING` if absent.

    An empty path returns the document itself. Negative list indices count from the end.

    >>> get_path({"data": {"rows": [{"q": "SELECT 2"}]}}, "data.rows.-1.q")
    'SELECT 2'
    >>> get_path({"data": []}, "data.0") is MISSING
    True
    """
    current = document
    if not path:
        return current
    for segment in path.split("."):
        if isinstance(current, dict):
            if segment not in current:
                return MISSING
            current = current[segment]
        elif isinstance(current, list):
            try:
                index = int(segment)
            except ValueError:
                return MISSING
            if not -len(current) <= index < len(current):
                return MISSING
            current = current[index]
        else:
            return MISSING
    return current


class HttpGenerator:
    """A text-to-SQL service reached by ``POST`` with a JSON body.

    Args:
        settings: the configuration's ``generator`` block (url or url_env, question_field,
            extra_body, headers, auth_header_env, sql_path, refusal_path).
        url: overrides ``settings.url`` / ``settings.url_env``.
        timeout_s: per-call timeout in seconds.
        transport: an ``httpx2`` transport (tests, custom TLS); default: the network.

    Raises:
        ProviderError: ``missing_credentials`` when no URL is configured (or ``url_env`` is
            unset), or ``auth_header_env`` names an unset variable.

    >>> from sqleval_pipeline.configs import HttpSettings
    >>> HttpGenerator(HttpSettings())
    Traceback (most recent call last):
    ...
    sqleval_pipeline.providers.errors.ProviderError: missing_credentials: the http generator needs an endpoint: set `url:` in the configuration's generator block, or `url_env:` naming an environment variable that holds it
    """

    def __init__(self, settings: HttpSettings, *, url: str | None = None, timeout_s: float = 60,
                 transport: httpx2.BaseTransport | None = None) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self.url = url or settings.url or self._url_from_env(settings)
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ProviderError("bad_request", f"the http generator's url {self.url!r} is not an "
                                "http(s) URL")
        self.name = f"http:{parts.netloc}{parts.path}"
        headers = {"accept": "application/json", **settings.headers}
        if settings.auth_header_env:
            auth = env_value(settings.auth_header_env)
            if not auth:
                raise ProviderError(
                    "missing_credentials",
                    f"the http generator needs an Authorization value: set "
                    f"{settings.auth_header_env} (settings.auth_header_env), e.g. "
                    f"`export {settings.auth_header_env}='Bearer <token>'`",
                )
            headers["authorization"] = auth
        self._client = http_client(headers=headers, timeout_s=timeout_s, transport=transport)

    @staticmethod
    def _url_from_env(settings: HttpSettings) -> str:
        if settings.url_env:
            url = env_value(settings.url_env)
            if url:
                return url
            raise ProviderError(
                "missing_credentials",
                f"the http generator needs an endpoint: set {settings.url_env} (settings.url_env) "
                f"to the service URL, e.g. `export {settings.url_env}=http://127.0.0.1:8080/sql`",
            )
        raise ProviderError(
            "missing_credentials",
            "the http generator needs an endpoint: set `url:` in the configuration's generator "
            "block, or `url_env:` naming an environment variable that holds it",
        )

    def request_body(self, ctx: GenerationContext) -> dict[str, Any]:
        """The JSON body posted for this case."""
        return {**self.settings.extra_body, self.settings.question_field: ctx.question,
                "case_id": ctx.case_id, "as_of": ctx.as_of.isoformat()}

    def generate(self, ctx: GenerationContext) -> GenerationOutput:
        """POST the case's question; SQL or a refusal, or a :class:`ProviderError`."""
        started = time.perf_counter()
        response = send_json(self._client, self.settings.method, self.url,
                             self.request_body(ctx), timeout_s=self.timeout_s)
        latency_ms = (time.perf_counter() - started) * 1000.0
        document, raw = read_json_response(
            response, url=self.url,
            credential_hint=(self.settings.auth_header_env and
                             f"the value of {self.settings.auth_header_env}"))
        return self._output(document, raw, latency_ms)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> HttpGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _output(self, document: Any, raw: str | None, latency_ms: float) -> GenerationOutput:
        tokens_in, tokens_out = reported_tokens(document, self.settings.sql_path)
        common = {"usage": Usage(latency_ms=round(latency_ms, 3), input_tokens=tokens_in,
                                 output_tokens=tokens_out), "raw_response": raw}
        if self.settings.refusal_path:
            refusal = get_path(document, self.settings.refusal_path)
            if refusal is not MISSING and refusal not in (None, False, ""):
                reason = (NO_REASON if refusal is True else
                          refusal.strip() if isinstance(refusal, str) else json.dumps(refusal))
                return GenerationOutput(kind="refusal", refusal_reason=reason or NO_REASON, **common)
        sql = get_path(document, self.settings.sql_path)
        if sql is MISSING:
            raise ProviderError(
                "malformed_response",
                f"{self.url}'s response has no {self.settings.sql_path!r} (settings.sql_path)"
                + (f" nor a refusal at {self.settings.refusal_path!r}"
                   if self.settings.refusal_path else ""),
                retryable=True, raw_response=raw)
        if sql is None or (isinstance(sql, str) and not sql.strip()):
            return GenerationOutput(kind="refusal", refusal_reason="the service returned no SQL",
                                    **common)
        if not isinstance(sql, str):
            raise ProviderError("malformed_response",
                                f"{self.settings.sql_path!r} in {self.url}'s response is a "
                                f"{type(sql).__name__}, not a string", retryable=True,
                                raw_response=raw)
        return GenerationOutput(kind="sql", sql=sql.strip(), **common)


#: the names a ``usage`` object gives input and output tokens (Anthropic's, then OpenAI's)
_TOKEN_NAMES = (("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens"))


def reported_tokens(document: Any, sql_path: str = "sql") -> tuple[int | None, int | None]:
    """(input, output) tokens from a ``usage`` object at the top of the response or beside its
    SQL; None for what is not reported (never 0 for "unknown").

    >>> reported_tokens({"sql": "SELECT 1", "usage": {"input_tokens": 812, "output_tokens": 40}})
    (812, 40)
    >>> reported_tokens({"data": {"sql": "SELECT 1", "usage": {"prompt_tokens": 9}}}, "data.sql")
    (9, None)
    >>> reported_tokens({"sql": "SELECT 1", "usage": {"input_tokens": "many"}})
    (None, None)
    """
    places = [document]
    parent = sql_path.rpartition(".")[0]
    if parent:
        places.append(get_path(document, parent))
    found: list[int | None] = [None, None]
    for place in places:
        usage = place.get("usage") if isinstance(place, dict) else None
        if not isinstance(usage, dict):
            continue
        for i, names in enumerate(_TOKEN_NAMES):
            for name in names:
                value = usage.get(name)
                if found[i] is None and isinstance(value, int) and not isinstance(value, bool) \
                        and value >= 0:
                    found[i] = value
    return found[0], found[1]
