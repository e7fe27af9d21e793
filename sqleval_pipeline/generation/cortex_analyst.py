"""Snowflake Cortex Analyst as a system under test: its REST API, one question per request.

``POST {account_url}/api/v2/cortex/analyst/message`` with::

    {"messages": [{"role": "user", "content": [{"type": "text", "text": <question>}]}],
     <exactly one of semantic_model_file | semantic_model | semantic_view | semantic_models>,
     "stream": <settings.stream>}

and the headers ``Authorization: Bearer <token from settings.token_env>`` and
``X-Snowflake-Authorization-Token-Type: <settings.token_type>``. Only the question and the
configured semantic model are sent: no schema, glossary, examples or prompt (Cortex Analyst
reads its own semantic model). Each case and run is a new single-turn request, never a
follow-up of an earlier one.

The answer is the analyst message's ``content`` blocks (``text``, ``sql``, ``suggestions``):

* an ``sql`` block with a non-empty ``statement`` is the answer (the first one when there are
  several; its ``confidence.verified_query_used`` stays in the raw response — the attempt
  record has no field for it);
* no SQL: a **refusal** whose reason is the text blocks, followed by the suggested questions
  (``Suggestions: …``);
* no content at all: a retryable ``malformed_response``.

With ``stream: true`` the response is server-sent events: ``status`` (``status``,
``status_message``), ``message.content.delta`` (``index``, ``type`` and ``text_delta`` /
``statement_delta`` (+ ``confidence``) / ``suggestions_delta: {index, suggestion_delta}``),
``warnings``, ``response_metadata``, ``error`` (``message``, ``code``, ``request_id``) and the
end, ``status: done`` (a ``done`` event is accepted too). Deltas are joined per ``index`` into
the same message as the non-streaming answer, then read the same way. An ``error`` event is a
retryable ``server_error``; a stream that ends before ``done`` a retryable
``malformed_response``.

HTTP errors (``{"message", "code", "request_id"}``) map as every provider's do: 429 is
``rate_limited`` honouring ``retry-after``, 5xx ``server_error`` (both retried by the attempt
runner), 401/403 ``auth_error``, other 4xx ``bad_request``.

>>> interpret_content([{"type": "text", "text": "We interpreted …"},
...                    {"type": "sql", "statement": "SELECT 1", "confidence": None}])
('sql', 'SELECT 1', None)
>>> interpret_content([{"type": "text", "text": "Ambiguous."},
...                    {"type": "suggestions", "suggestions": ["Revenue by month?", "Orders?"]}])
('refusal', None, 'Ambiguous. Suggestions: Revenue by month?; Orders?')
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx2

from sqleval_pipeline.configs import CORTEX_MODEL_FIELDS, CortexAnalystSettings
from sqleval_pipeline.generation._common import NO_REASON
from sqleval_pipeline.generation.base import GenerationContext, GenerationOutput
from sqleval_pipeline.generation.vendor_common import (
    bearer_token,
    call_json,
    sse_or_json,
    vendor_client,
    vendor_details,
)
from sqleval_pipeline.providers.errors import ProviderError, truncate_raw
from sqleval_pipeline.pipeline.records import Usage

MESSAGE_PATH = "/api/v2/cortex/analyst/message"
TOKEN_TYPE_HEADER = "X-Snowflake-Authorization-Token-Type"


def interpret_content(content: Any) -> tuple[str, str | None, str | None]:
    """``(kind, sql, refusal_reason)`` from an analyst message's ``content``; ValueError when
    it is not a list of blocks or holds none that answers (see module doc)."""
    if not isinstance(content, list):
        raise ValueError(f"message.content is a {type(content).__name__}, not a list of blocks")
    texts: list[str] = []
    suggestions: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "sql":
            statement = block.get("statement")
            if isinstance(statement, str) and statement.strip():
                return "sql", statement.strip(), None
        elif kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
            texts.append(block["text"].strip())
        elif kind == "suggestions" and isinstance(block.get("suggestions"), list):
            suggestions += [s.strip() for s in block["suggestions"] if isinstance(s, str) and s.strip()]
    if not texts and not suggestions:
        kinds = ", ".join(sorted({str(b.get("type")) for b in content if isinstance(b, dict)}))
        raise ValueError(f"the message has no SQL, text or suggestions (blocks: {kinds or 'none'})")
    reason = " ".join(texts)
    if suggestions:
        reason = (reason + " " if reason else "") + "Suggestions: " + "; ".join(suggestions)
    return "refusal", None, reason or NO_REASON


class _StreamedMessage:
    """The analyst message assembled from ``message.content.delta`` events."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.suggestions: dict[int, dict[int, str]] = {}
        self.warnings: list[Any] = []
        self.metadata: Any = None
        self.request_id: str | None = None
        self.statuses: list[str] = []
        self.done = False

    def add(self, event: str, data: Any, url: str) -> None:
        if isinstance(data, dict) and isinstance(data.get("request_id"), str):
            self.request_id = data["request_id"]
        if event == "status":
            status = data.get("status") if isinstance(data, dict) else None
            if isinstance(status, str):
                self.statuses.append(status)
                self.done = self.done or status == "done"
        elif event == "done":
            self.done = True
        elif event == "warnings" and isinstance(data, dict):
            self.warnings += list(data.get("warnings") or [])
        elif event == "response_metadata":
            self.metadata = data
        elif event == "error":
            message = data.get("message") if isinstance(data, dict) else None
            details = vendor_details(data)
            raise ProviderError(
                "server_error", f"{url} sent an error event: {message or data!r}"
                + (f" ({details})" if details else ""), retryable=True,
                raw_response=truncate_raw(json.dumps(self.document() | {"error": data})))
        elif event == "message.content.delta" and isinstance(data, dict):
            self._delta(data)

    def _delta(self, data: dict[str, Any]) -> None:
        index = data.get("index")
        kind = data.get("type")
        if not isinstance(index, int) or not isinstance(kind, str):
            return
        block = self.blocks.setdefault(index, {"type": kind})
        if kind == "text":
            block["text"] = block.get("text", "") + str(data.get("text_delta") or "")
        elif kind == "sql":
            block["statement"] = block.get("statement", "") + str(data.get("statement_delta") or "")
            if data.get("confidence") is not None:
                block["confidence"] = data["confidence"]
        elif kind == "suggestions":
            delta = data.get("suggestions_delta") or {}
            if isinstance(delta, dict) and isinstance(delta.get("index"), int):
                parts = self.suggestions.setdefault(index, {})
                parts[delta["index"]] = parts.get(delta["index"], "") + str(
                    delta.get("suggestion_delta") or "")
                block["suggestions"] = [parts[i] for i in sorted(parts)]
        else:
            block.update({k: v for k, v in data.items() if k not in ("index", "type")})

    def document(self) -> dict[str, Any]:
        """The non-streaming response's shape, plus ``streamed`` and the statuses seen."""
        return {"request_id": self.request_id,
                "message": {"role": "analyst", "content": [self.blocks[i] for i in sorted(self.blocks)]},
                "warnings": self.warnings, "response_metadata": self.metadata,
                "streamed": True, "statuses": self.statuses}


class CortexAnalystGenerator:
    """Cortex Analyst answering over a configured semantic model (module doc).

    Args:
        settings: the configuration's ``generator`` block.
        timeout_s: per-call timeout in seconds (the configuration's ``timeout_s``).
        transport: an ``httpx2`` transport (tests, custom TLS); default: the network.

    Raises:
        ProviderError: ``missing_credentials`` when ``settings.token_env`` is unset — at
            construction, before any case is asked.
    """

    def __init__(self, settings: CortexAnalystSettings, *, timeout_s: float = 60,
                 transport: httpx2.BaseTransport | None = None) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self.url = settings.account_url.rstrip("/") + MESSAGE_PATH
        self.name = f"cortex_analyst:{urlsplit(settings.account_url).netloc}"
        token = bearer_token(settings.token_env, vendor="the cortex_analyst generator",
                             example="<programmatic access token>")
        self._client = vendor_client(token, {TOKEN_TYPE_HEADER: settings.token_type},
                                     timeout_s=timeout_s, transport=transport)
        self._hint = f"the token in {settings.token_env} and token_type {settings.token_type}"

    def request_body(self, ctx: GenerationContext) -> dict[str, Any]:
        """The JSON body posted for this case: the question and the one semantic model."""
        body: dict[str, Any] = {
            "messages": [{"role": "user", "content": [{"type": "text", "text": ctx.question}]}],
            "stream": self.settings.stream,
        }
        for field in CORTEX_MODEL_FIELDS:
            value = getattr(self.settings, field)
            if value:
                body[field] = ([m.model_dump(exclude_none=True) for m in value]
                               if field == "semantic_models" else value)
        return body

    def generate(self, ctx: GenerationContext) -> GenerationOutput:
        """Ask Cortex Analyst the case's question; SQL or a refusal, or a :class:`ProviderError`."""
        started = time.perf_counter()
        body = self.request_body(ctx)
        if self.settings.stream:
            document, events = sse_or_json(self._client, self.url, body, timeout_s=self.timeout_s,
                                           credential_hint=self._hint)
            raw = None
            if events is not None:
                document = self._assemble(events)
        else:
            document, raw = call_json(self._client, "POST", self.url, body,
                                      timeout_s=self.timeout_s, credential_hint=self._hint)
        latency_ms = (time.perf_counter() - started) * 1000.0
        if raw is None:
            raw = truncate_raw(json.dumps(document, default=str))
        return self._output(document, raw, latency_ms)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> CortexAnalystGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------

    def _assemble(self, events: Iterator[tuple[str, Any]]) -> dict[str, Any]:
        message = _StreamedMessage()
        try:
            for event, data in events:
                message.add(event, data, self.url)
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
        if not message.done:
            raise ProviderError("malformed_response",
                                f"{self.url}'s event stream ended before its done status "
                                f"(statuses seen: {', '.join(message.statuses) or 'none'})",
                                retryable=True,
                                raw_response=truncate_raw(json.dumps(message.document())))
        return message.document()

    def _output(self, document: Any, raw: str | None, latency_ms: float) -> GenerationOutput:
        message = document.get("message") if isinstance(document, dict) else None
        if not isinstance(message, dict):
            raise ProviderError("malformed_response", f"{self.url}'s response has no 'message' "
                                "object", retryable=True, raw_response=raw)
        try:
            kind, sql, reason = interpret_content(message.get("content"))
        except ValueError as exc:
            raise ProviderError("malformed_response", f"{self.url}'s answer is not usable: {exc}",
                                retryable=True, raw_response=raw) from exc
        return GenerationOutput(kind=kind, sql=sql, refusal_reason=reason,  # type: ignore[arg-type]
                                usage=Usage(latency_ms=round(latency_ms, 3)), raw_response=raw)
