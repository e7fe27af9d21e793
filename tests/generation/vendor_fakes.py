"""Loopback fakes of the vendor text-to-SQL APIs, speaking their documented wire formats.

Both are :class:`tests.generation.fakes.FakeServer` subclasses (a real HTTP server on
127.0.0.1, so the generators' real client path runs) that **validate every request first**
and reject a bad one the way the vendor documents, before any scripted behaviour is used:

- :class:`FakeCortexAnalyst` — Snowflake Cortex Analyst, ``POST /api/v2/cortex/analyst/message``.
  Rejects a wrong path (404) or method (405), a missing or wrong ``Authorization: Bearer``
  (401), a missing or unknown ``X-Snowflake-Authorization-Token-Type`` (401), a body that is
  not JSON or not the documented shape (``messages`` whose last is a ``user`` message with
  exactly one ``text`` block; ``stream`` a boolean; no unknown key) or that does not carry
  exactly one of ``semantic_model_file`` / ``semantic_model`` / ``semantic_view`` /
  ``semantic_models`` (400). Errors are ``{"message", "code", "request_id"}`` (the codes are
  illustrative). Answers are JSON (``{"request_id", "message": {"role": "analyst",
  "content": [...]}, "warnings"}``) or, when the request says ``"stream": true``, server-sent
  events: ``status``, ``message.content.delta`` (``text_delta`` / ``statement_delta`` /
  ``suggestions_delta``), ``warnings``, ``response_metadata``, ``error``, ``status: done``.
- :class:`FakeGenie` — Databricks Genie's Conversation API: ``POST .../start-conversation``,
  ``GET .../conversations/{c}/messages/{m}`` and ``GET .../attachments/{a}/query-result``.
  Rejects a missing or wrong bearer token (401), an unknown route (404) or method (405), an
  unknown space, conversation or message (404) and a start body that is not
  ``{"content": "<non-empty>"}`` (400), as ``{"error_code", "message"}``. Each start consumes
  one scripted :class:`GenieReply`: the statuses the following polls report, then the
  terminal message (attachments, or ``error``), and the query result.

Every request (rejected or not) is in ``fake.requests``; every rejection in
``fake.rejections`` as ``(status, message)``. Errors (429 with ``retry-after``, 5xx, any
status) are the generic :func:`~tests.generation.fakes.rate_limited`,
:func:`~tests.generation.fakes.server_error` and :func:`~tests.generation.fakes.status`
behaviours, rendered in each vendor's error shape.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.generation.fakes import Raw, ReceivedRequest, FakeServer, _json_headers, _encode

__all__ = [
    "AnalystReply", "FakeCortexAnalyst", "FakeGenie", "GenieReply", "analyst_sql",
    "analyst_suggestions", "analyst_text", "analyst_stream_error", "analyst_stream_cut",
    "genie_sql", "genie_text", "genie_failed", "genie_cancelled", "genie_stuck", "statement",
    "make_case", "StubBuilder",
]

CORTEX_PATH = "/api/v2/cortex/analyst/message"
TOKEN_TYPES = ("KEYPAIR_JWT", "OAUTH", "PROGRAMMATIC_ACCESS_TOKEN")
MODEL_FIELDS = ("semantic_model_file", "semantic_model", "semantic_view", "semantic_models")
CORTEX_BODY_KEYS = {"messages", "stream", "operation", "warehouse", "source", "experimental",
                    *MODEL_FIELDS}


class _Reject(Exception):
    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


class _VendorFake(FakeServer):
    """Validation first, then the script; every request and rejection recorded."""

    def __init__(self, default: Any = None, *, script: Iterable[Any] = ()) -> None:
        super().__init__(default, script=script)
        self.rejections: list[tuple[int, str]] = []

    def _record(self, req: ReceivedRequest) -> None:
        with self._lock:
            self.requests.append(req)

    def _pop(self, req: ReceivedRequest) -> Any:
        with self._lock:
            item = self._queue.popleft() if self._queue else self.default
        return item(req) if callable(item) else item

    def _reject(self, exc: _Reject) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            self.rejections.append((exc.status, exc.message))
        return self._error(exc.status, exc.kind, exc.message, {})

    def _raw(self, behaviour: Raw) -> tuple[int, dict[str, str], bytes]:
        if behaviour.delay:
            self._stopping.wait(behaviour.delay)
        if behaviour.error_type is not None:
            return self._error(behaviour.status, behaviour.error_type,
                               behaviour.message or "error", dict(behaviour.headers))
        return behaviour.status, _json_headers(behaviour.headers), _encode(behaviour.body)


# =========================================================================== Cortex Analyst


@dataclass(frozen=True)
class AnalystReply:
    """An analyst message (``content`` blocks); for streams, ``error`` ends it with an
    ``error`` event and ``cut`` ends it before ``status: done``."""

    content: tuple[dict[str, Any], ...]
    warnings: tuple[str, ...] = ()
    error: Mapping[str, str] | None = None
    cut: bool = False
    delay: float = 0.0


def analyst_sql(statement: str, *, text: str = "This is our interpretation of your question.",
                confidence: Mapping[str, Any] | None = None,
                warnings: Sequence[str] = ()) -> AnalystReply:
    """A text block and an ``sql`` block (with ``confidence`` when given)."""
    block: dict[str, Any] = {"type": "sql", "statement": statement}
    if confidence is not None:
        block["confidence"] = dict(confidence)
    return AnalystReply(content=({"type": "text", "text": text}, block), warnings=tuple(warnings))


def analyst_text(text: str) -> AnalystReply:
    """A text-only answer (Cortex Analyst could not write SQL)."""
    return AnalystReply(content=({"type": "text", "text": text},))


def analyst_suggestions(text: str, suggestions: Sequence[str]) -> AnalystReply:
    """An ambiguous question: a text block and suggested questions."""
    return AnalystReply(content=({"type": "text", "text": text},
                                 {"type": "suggestions", "suggestions": list(suggestions)}))


def analyst_stream_error(message: str, code: str = "399504") -> AnalystReply:
    """A stream that fails after its first status with an ``error`` event."""
    return AnalystReply(content=(), error={"message": message, "code": code})


def analyst_stream_cut(statement: str = "SELECT 1") -> AnalystReply:
    """A stream that stops before its ``done`` status."""
    return AnalystReply(content=({"type": "sql", "statement": statement},), cut=True)


def _halves(text: str) -> list[str]:
    middle = max(1, len(text) // 2)
    return [part for part in (text[:middle], text[middle:]) if part]


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


class FakeCortexAnalyst(_VendorFake):
    """Snowflake Cortex Analyst (module doc). ``token`` is the only bearer token accepted."""

    def __init__(self, default: Any = None, *, token: str = "sf-test-token",
                 script: Iterable[Any] = ()) -> None:
        super().__init__(default if default is not None else analyst_sql("SELECT 1"), script=script)
        self.token = token

    def error_body(self, status_code: int, error_type: str, message: str) -> Any:
        code = {400: "399504", 401: "390303", 404: "390404", 405: "390405",
                429: "399505"}.get(status_code, "399500")
        return {"message": message, "code": code, "request_id": str(uuid.uuid4())}

    def validate(self, req: ReceivedRequest) -> dict[str, Any]:
        """The request's JSON body, or :class:`_Reject` with the vendor's status."""
        if req.path.split("?")[0] != CORTEX_PATH:
            raise _Reject(404, "not_found", f"no endpoint {req.path}")
        if req.method != "POST":
            raise _Reject(405, "method", f"{req.method} is not allowed on {CORTEX_PATH}")
        if req.headers.get("authorization") != f"Bearer {self.token}":
            raise _Reject(401, "auth", "Authorization header is missing or the token is invalid")
        token_type = req.headers.get("x-snowflake-authorization-token-type")
        if token_type not in TOKEN_TYPES:
            raise _Reject(401, "auth", f"X-Snowflake-Authorization-Token-Type {token_type!r} "
                          f"is not one of {', '.join(TOKEN_TYPES)}")
        if not req.headers.get("content-type", "").startswith("application/json"):
            raise _Reject(400, "bad", "Content-Type must be application/json")
        body = req.json
        if not isinstance(body, dict):
            raise _Reject(400, "bad", "the request body is not a JSON object")
        unknown = sorted(set(body) - CORTEX_BODY_KEYS)
        if unknown:
            raise _Reject(400, "bad", f"unknown fields: {', '.join(unknown)}")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _Reject(400, "bad", "messages must be a non-empty array")
        last = messages[-1]
        if not isinstance(last, dict) or last.get("role") != "user":
            raise _Reject(400, "bad", "the last message's role must be user")
        content = last.get("content")
        if (not isinstance(content, list) or len(content) != 1 or not isinstance(content[0], dict)
                or content[0].get("type") != "text" or set(content[0]) != {"type", "text"}
                or not isinstance(content[0].get("text"), str) or not content[0]["text"].strip()):
            raise _Reject(400, "bad", "the user message must hold exactly one text block "
                          "{type: text, text: <question>}")
        models = [k for k in MODEL_FIELDS if body.get(k) not in (None, "", [])]
        if len(models) != 1:
            raise _Reject(400, "bad", "exactly one of semantic_model_file, semantic_model, "
                          f"semantic_view, semantic_models is required; got {models or 'none'}")
        if "semantic_model_file" in models and not re.match(r"^@[^/]+/.+", body["semantic_model_file"]):
            raise _Reject(400, "bad", "semantic_model_file must be a fully qualified stage path")
        if "semantic_models" in models:
            for entry in body["semantic_models"]:
                keys = {k for k, v in (entry or {}).items() if v} if isinstance(entry, dict) else set()
                if len(keys) != 1 or not keys <= {"semantic_model_file", "semantic_view",
                                                  "inline_semantic_model"}:
                    raise _Reject(400, "bad", f"bad semantic_models entry {entry!r}")
        if "stream" in body and not isinstance(body["stream"], bool):
            raise _Reject(400, "bad", "stream must be a boolean")
        return body

    def _respond(self, req: ReceivedRequest) -> tuple[int, dict[str, str], bytes]:
        self._record(req)
        try:
            body = self.validate(req)
        except _Reject as exc:
            return self._reject(exc)
        behaviour = self._pop(req)
        if isinstance(behaviour, Raw):
            return self._raw(behaviour)
        if behaviour.delay:
            self._stopping.wait(behaviour.delay)
        request_id = str(uuid.uuid4())
        if body.get("stream"):
            return 200, {"content-type": "text/event-stream"}, self._events(behaviour, request_id)
        document = {"request_id": request_id,
                    "message": {"role": "analyst", "content": list(behaviour.content)},
                    "warnings": [{"message": w} for w in behaviour.warnings]}
        return 200, _json_headers({}), _encode(document)

    def _events(self, reply: AnalystReply, request_id: str) -> bytes:
        out = [_sse("status", {"status": "interpreting_question",
                               "status_message": "Interpreting question", "request_id": request_id})]
        if reply.error is not None:
            out.append(_sse("error", {**reply.error, "request_id": request_id}))
            return "".join(out).encode()
        for index, block in enumerate(reply.content):
            kind = block["type"]
            if kind == "text":
                out += [_sse("message.content.delta", {"index": index, "type": "text",
                                                       "text_delta": part})
                        for part in _halves(block["text"])]
            elif kind == "sql":
                out.append(_sse("status", {"status": "generating_sql",
                                           "status_message": "Generating SQL"}))
                parts = _halves(block["statement"])
                for n, part in enumerate(parts):
                    delta: dict[str, Any] = {"index": index, "type": "sql", "statement_delta": part}
                    if n == len(parts) - 1 and "confidence" in block:
                        delta["confidence"] = block["confidence"]
                    out.append(_sse("message.content.delta", delta))
            elif kind == "suggestions":
                out.append(_sse("status", {"status": "generating_suggestions",
                                           "status_message": "Generating suggestions"}))
                for n, suggestion in enumerate(block["suggestions"]):
                    out += [_sse("message.content.delta", {
                        "index": index, "type": "suggestions",
                        "suggestions_delta": {"index": n, "suggestion_delta": part}})
                        for part in _halves(suggestion)]
        if reply.cut:
            return "".join(out).encode()
        if reply.warnings:
            out.append(_sse("warnings", {"warnings": [{"message": w} for w in reply.warnings]}))
        out.append(_sse("response_metadata", {"analyst_latency_ms": 812}))
        out.append(_sse("status", {"status": "done", "status_message": "Done"}))
        return "".join(out).encode()


# =========================================================================== Genie

GENIE_PREFIX = "/api/2.0/genie/spaces/"
_GENIE_ROUTES = [
    ("POST", re.compile(r"^/api/2\.0/genie/spaces/(?P<space>[^/]+)/start-conversation$"), "start"),
    ("GET", re.compile(r"^/api/2\.0/genie/spaces/(?P<space>[^/]+)/conversations/(?P<conv>[^/]+)"
                       r"/messages/(?P<msg>[^/]+)$"), "message"),
    ("GET", re.compile(r"^/api/2\.0/genie/spaces/(?P<space>[^/]+)/conversations/(?P<conv>[^/]+)"
                       r"/messages/(?P<msg>[^/]+)/attachments/(?P<att>[^/]+)/query-result$"), "result"),
]


@dataclass(frozen=True)
class GenieReply:
    """One message's life: ``statuses`` reported by start and the polls before ``final``
    (None: never finishes); then ``attachments`` / ``error``; ``result`` is the
    ``statement_response`` served for its query attachment (or ``result_raw`` verbatim);
    ``poll_raw`` maps a poll number (1 = the first GET) to a verbatim response."""

    statuses: tuple[str, ...] = ("SUBMITTED", "FETCHING_METADATA", "ASKING_AI", "EXECUTING_QUERY")
    final: str | None = "COMPLETED"
    attachments: tuple[dict[str, Any], ...] = ()
    error: Mapping[str, str] | None = None
    result: Mapping[str, Any] | None = None
    result_raw: Raw | None = None
    poll_raw: Mapping[int, Raw] = field(default_factory=dict)
    delay: float = 0.0


def genie_sql(query: str, *, description: str = "Counts the orders.", **kw: Any) -> GenieReply:
    """Genie answered with a query attachment."""
    attachment = {"attachment_id": f"att-{uuid.uuid4().hex[:12]}",
                  "query": {"query": query, "description": description, "title": "Answer",
                            "statement_id": f"stmt-{uuid.uuid4().hex[:8]}",
                            "query_result_metadata": {"row_count": 1, "is_truncated": False}}}
    return GenieReply(attachments=(attachment,), **kw)


def genie_text(text: str, *, suggested: Sequence[str] = (), **kw: Any) -> GenieReply:
    """Genie answered in words only (and maybe suggested questions)."""
    attachments: list[dict[str, Any]] = [{"attachment_id": f"att-{uuid.uuid4().hex[:12]}",
                                          "text": {"content": text,
                                                   "purpose": "TEXT_ATTACHMENT_PURPOSE_ANSWER"}}]
    if suggested:
        attachments.append({"attachment_id": f"att-{uuid.uuid4().hex[:12]}",
                            "suggested_questions": {"questions": list(suggested)}})
    return GenieReply(statuses=("SUBMITTED", "ASKING_AI"), attachments=tuple(attachments), **kw)


def genie_failed(error: str, kind: str = "GENERIC_SQL_EXEC_EXCEPTION") -> GenieReply:
    """The message ends FAILED with ``error: {error, type}``."""
    return GenieReply(statuses=("SUBMITTED", "ASKING_AI"), final="FAILED",
                      error={"error": error, "type": kind})


def genie_cancelled() -> GenieReply:
    return GenieReply(statuses=("SUBMITTED",), final="CANCELLED")


def genie_stuck(status: str = "ASKING_AI") -> GenieReply:
    """A message that never leaves ``status``."""
    return GenieReply(statuses=("SUBMITTED", status), final=None)


def statement(columns: Sequence[Mapping[str, Any]], rows: Sequence[Sequence[Any]], *,
              state: str = "SUCCEEDED", truncated: bool = False) -> dict[str, Any]:
    """A ``statement_response``: ``columns`` are ``{name, type_name, ...}`` (position and
    ``type_text`` are filled in), ``rows`` the ``data_array`` (strings and None)."""
    cols = [{"position": i, "type_text": str(c["type_name"]), **c} for i, c in enumerate(columns)]
    return {"statement_id": f"stmt-{uuid.uuid4().hex[:8]}", "status": {"state": state},
            "manifest": {"format": "JSON_ARRAY",
                         "schema": {"column_count": len(cols), "columns": cols},
                         "total_row_count": len(rows), "truncated": truncated},
            "result": {"chunk_index": 0, "row_offset": 0, "row_count": len(rows),
                       "data_array": [list(r) for r in rows]}}


@dataclass
class _Message:
    reply: GenieReply
    space: str
    conversation_id: str
    message_id: str
    content: str
    polls: int = 0

    def status(self) -> str:
        statuses = self.reply.statuses or ("SUBMITTED",)
        if self.polls < len(statuses):
            return statuses[self.polls]
        return self.reply.final or statuses[-1]

    def document(self) -> dict[str, Any]:
        status = self.status()
        doc: dict[str, Any] = {
            "id": self.message_id, "message_id": self.message_id, "space_id": self.space,
            "conversation_id": self.conversation_id, "content": self.content, "status": status,
            "user_id": 4242, "created_timestamp": 1751270400000,
            "last_updated_timestamp": 1751270400000 + 500 * self.polls, "attachments": None}
        if status in ("COMPLETED", "QUERY_RESULT_EXPIRED"):
            doc["attachments"] = [dict(a) for a in self.reply.attachments]
        if status == "FAILED" and self.reply.error is not None:
            doc["error"] = dict(self.reply.error)
        return doc


class FakeGenie(_VendorFake):
    """Databricks Genie's Conversation API (module doc) for the spaces in ``spaces``."""

    def __init__(self, default: Any = None, *, token: str = "dapi-test-token",
                 spaces: Sequence[str] = ("01ef1234567890abcdef1234567890ab",),
                 script: Iterable[Any] = ()) -> None:
        super().__init__(default if default is not None else genie_sql("SELECT 1"), script=script)
        self.token = token
        self.spaces = set(spaces)
        self.messages: dict[str, _Message] = {}

    def error_body(self, status_code: int, error_type: str, message: str) -> Any:
        code = {400: "INVALID_PARAMETER_VALUE", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                404: "RESOURCE_DOES_NOT_EXIST", 405: "BAD_REQUEST", 429: "RESOURCE_EXHAUSTED",
                503: "TEMPORARILY_UNAVAILABLE"}.get(status_code, "INTERNAL_ERROR")
        return {"error_code": code, "message": message}

    @property
    def conversations(self) -> list[str]:
        """Conversation ids, in the order they were started."""
        with self._lock:
            return [m.conversation_id for m in self.messages.values()]

    def route(self, req: ReceivedRequest) -> tuple[str, dict[str, str]]:
        path = req.path.split("?")[0]
        matched = [(method, name, m.groupdict()) for method, rx, name in _GENIE_ROUTES
                   if (m := rx.match(path))]
        if not matched:
            raise _Reject(404, "route", f"no API at {path}")
        for method, name, groups in matched:
            if method == req.method:
                break
        else:
            raise _Reject(405, "method", f"{req.method} is not allowed on {path}")
        if req.headers.get("authorization") != f"Bearer {self.token}":
            raise _Reject(401, "auth", "Credential was not sent or was of an unsupported type")
        if groups["space"] not in self.spaces:
            raise _Reject(404, "space", f"Genie space {groups['space']} does not exist")
        if name == "start":
            body = req.json
            if (not isinstance(body, dict) or not isinstance(body.get("content"), str)
                    or not body["content"].strip()
                    or set(body) - {"content", "enable_visualization"}):
                raise _Reject(400, "bad", "start-conversation takes {\"content\": "
                              "\"<non-empty question>\"}")
            return name, groups
        message = self.messages.get(groups["msg"])
        if message is None or message.conversation_id != groups["conv"] or message.space != groups["space"]:
            raise _Reject(404, "missing", f"message {groups['msg']} of conversation "
                          f"{groups['conv']} does not exist")
        return name, groups

    def _respond(self, req: ReceivedRequest) -> tuple[int, dict[str, str], bytes]:
        self._record(req)
        try:
            name, groups = self.route(req)
        except _Reject as exc:
            return self._reject(exc)
        if name == "start":
            behaviour = self._pop(req)
            if isinstance(behaviour, Raw):
                return self._raw(behaviour)
            if behaviour.delay:
                self._stopping.wait(behaviour.delay)
            conv, msg = uuid.uuid4().hex, uuid.uuid4().hex
            message = _Message(behaviour, groups["space"], conv, msg, req.json["content"])
            with self._lock:
                self.messages[msg] = message
            document = {"conversation_id": conv, "message_id": msg,
                        "conversation": {"id": conv, "space_id": groups["space"],
                                         "title": req.json["content"][:40]},
                        "message": message.document()}
            return 200, _json_headers({}), _encode(document)
        message = self.messages[groups["msg"]]
        if name == "message":
            with self._lock:
                message.polls += 1
                poll = message.polls
            if poll in message.reply.poll_raw:
                return self._raw(message.reply.poll_raw[poll])
            return 200, _json_headers({}), _encode(message.document())
        known = {a.get("attachment_id") for a in message.reply.attachments if "query" in a}
        if groups["att"] not in known or message.status() != "COMPLETED":
            return self._reject(_Reject(404, "missing", f"no query result for attachment {groups['att']}"))
        if message.reply.result_raw is not None:
            return self._raw(message.reply.result_raw)
        result = message.reply.result or statement([{"name": "x", "type_name": "INT"}], [["1"]])
        return 200, _json_headers({}), _encode({"statement_response": dict(result)})


# =========================================================================== cases, contexts


def make_case(question: str = "How many orders were placed in June 2025?", case_id: str = "ven-001"):
    """A verified golden case (only its id and question matter to the attempt runner)."""
    from sqleval_pipeline.golden.model import Case

    return Case(id=case_id, question=question, reference_sql="SELECT 1", difficulty="simple_aggregate",
                band="answerable", cluster="orders", split="dev", status="verified",
                provenance={"source": "vendor fake", "author": "tests"})


class StubBuilder:
    """A context builder that needs no catalog: the question, the as-of date, a tiny schema."""

    def build(self, case_id: str, question: str, run_index: int):
        from sqleval_pipeline.generation.base import GenerationContext

        return GenerationContext(case_id=case_id, run_index=run_index, question=question,
                                 as_of=dt.date(2025, 6, 30),
                                 schema_context="CREATE TABLE fct_orders (order_id BIGINT);",
                                 prompt="RENDERED PROMPT (never sent to a vendor)")
