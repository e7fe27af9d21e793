"""Loopback fakes of the providers the generators talk to, over real HTTP.

Each fake is a stdlib :class:`http.server.ThreadingHTTPServer` bound to ``127.0.0.1`` on a
free port, so the real SDK/client code paths (request building, auth headers, response
parsing, status-code exceptions, timeouts) run against it:

- :class:`FakeAnthropic` speaks the Anthropic Messages API (``POST /v1/messages``);
- :class:`FakeOpenAI` speaks OpenAI chat completions (``POST /v1/chat/completions`` and
  ``/chat/completions``);
- :class:`FakeTextToSqlService` is a team's own text-to-SQL service (``POST`` anywhere, JSON
  ``{"sql": ..., "refusal": ...}`` by default, any shape via ``shape=``).

Behaviour is scripted: queue behaviours with :meth:`FakeServer.queue` (consumed one per
request, in order) and/or set a ``default`` — a behaviour, or a function of the
:class:`ReceivedRequest` returning one — for requests once the queue is empty. ``latency``
adds a fixed sleep to every request (benchmarks). Every request is recorded in
``fake.requests`` so tests can assert what the client sent.

Behaviours (module-level constructors):

- :func:`sql` / :func:`refusal` — the model/service answers (``delay=`` makes it slow);
- :func:`text` — the model answers with arbitrary text (e.g. not JSON, or fenced JSON);
- :func:`rate_limited` — HTTP 429 with a ``retry-after`` header;
- :func:`server_error` — HTTP 5xx (500 by default);
- :func:`status` — any status with the provider's error body;
- :func:`malformed` — HTTP 200 whose body is not valid JSON;
- :func:`raw` — any status, headers and body, verbatim.

Use as a context manager (benchmarks, scripts) or through the pytest fixtures in
``tests/generation/conftest.py``::

    >>> from tests.generation.fakes import FakeOpenAI, sql, rate_limited
    >>> with FakeOpenAI() as fake:                      # doctest: +SKIP
    ...     fake.queue(rate_limited(0.2), sql("SELECT 1"))
    ...     client = OpenAI(api_key="test", base_url=fake.base_url + "/v1", max_retries=0)
    ...     fake.requests[-1].json["temperature"]

Loopback traffic must not go through a proxy: the fakes add ``127.0.0.1,localhost`` to
``NO_PROXY``/``no_proxy`` when they start (see :func:`ensure_no_proxy`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

__all__ = [
    "Answer", "Raw", "ReceivedRequest", "FakeServer", "FakeAnthropic", "FakeOpenAI",
    "FakeTextToSqlService", "sql", "refusal", "text", "rate_limited", "server_error", "status",
    "malformed", "raw", "ensure_no_proxy", "make_context",
]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


def ensure_no_proxy() -> None:
    """Make sure ``NO_PROXY``/``no_proxy`` exempt the loopback hosts (idempotent)."""
    for var in ("NO_PROXY", "no_proxy"):
        current = [h.strip() for h in os.environ.get(var, "").split(",") if h.strip()]
        missing = [h for h in LOOPBACK_HOSTS if h not in current]
        if missing:
            os.environ[var] = ",".join([*current, *missing])


# --------------------------------------------------------------------------- behaviours


@dataclass(frozen=True)
class Answer:
    """The system answers: SQL, a refusal, or (``text``) arbitrary model text.

    ``delay`` sleeps before answering (a slow response); ``thinking`` adds a thinking block
    to an Anthropic answer; ``usage`` overrides the reported token counts.
    """

    sql: str | None = None
    refusal: str | None = None
    text: str | None = None
    delay: float = 0.0
    thinking: bool = True
    usage: tuple[int, int] = (120, 30)


@dataclass(frozen=True)
class Raw:
    """A verbatim HTTP response (status, headers, body); ``body`` may be bytes, str or JSON data.

    ``error_type`` (and ``message``) ask the fake to render its provider's error body
    instead of ``body``.
    """

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    error_type: str | None = None
    message: str | None = None


Behaviour = Union[Answer, Raw]
Handler = Callable[["ReceivedRequest"], Behaviour]


def sql(query: str, *, delay: float = 0.0, thinking: bool = True) -> Answer:
    """The model/service answers with SQL."""
    return Answer(sql=query, delay=delay, thinking=thinking)


def refusal(reason: str, *, delay: float = 0.0) -> Answer:
    """The model/service declines to answer, saying why."""
    return Answer(refusal=reason, delay=delay)


def text(model_text: str, *, delay: float = 0.0) -> Answer:
    """The model answers with this exact text (e.g. prose, or a fenced JSON block)."""
    return Answer(text=model_text, delay=delay)


def rate_limited(retry_after: float | str | None = 1.0, *, delay: float = 0.0) -> Raw:
    """HTTP 429; ``retry_after`` seconds go into the ``retry-after`` header (None: no header)."""
    headers = {} if retry_after is None else {"retry-after": str(retry_after)}
    return Raw(status=429, headers=headers, delay=delay, error_type="rate_limit_error",
               message="rate limit exceeded, slow down")


def server_error(code: int = 500, *, delay: float = 0.0) -> Raw:
    """HTTP 5xx with the provider's error body."""
    return Raw(status=code, delay=delay, error_type="api_error", message="internal server error")


def status(code: int, message: str = "request failed", *, error_type: str | None = None,
           headers: Mapping[str, str] | None = None) -> Raw:
    """Any HTTP status with the provider's error body (e.g. 401, 400, 404)."""
    default_type = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error"}.get(code, "api_error")
    return Raw(status=code, headers=dict(headers or {}), error_type=error_type or default_type,
               message=message)


def malformed(body: bytes = b'{"id": "resp_1", "content": [', *, delay: float = 0.0) -> Raw:
    """HTTP 200 with a JSON content type but a body that does not parse."""
    return Raw(status=200, body=body, delay=delay)


def raw(code: int, body: Any = None, headers: Mapping[str, str] | None = None, *,
        delay: float = 0.0) -> Raw:
    """A verbatim response: ``body`` bytes/str are sent as is, other values as JSON."""
    return Raw(status=code, body=body, headers=dict(headers or {}), delay=delay)


# --------------------------------------------------------------------------- requests


@dataclass
class ReceivedRequest:
    """One request the fake received (headers keys lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float

    @property
    def json(self) -> Any:
        """The request body parsed as JSON (None when empty or not JSON)."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


# --------------------------------------------------------------------------- server base


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # benchmarks open dozens of connections at once
    fake: FakeServer


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real providers

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes; without TCP_NODELAY, Nagle's algorithm plus
        # the client's delayed ACK adds ~40 ms to every response on a kept-alive connection
        import socket

        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr
        return

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        self._handle()

    def do_GET(self) -> None:  # noqa: N802
        self._handle()

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        req = ReceivedRequest(
            method=self.command, path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body, received_at=time.monotonic(),
        )
        fake = self.server.fake
        code, headers, payload = fake._respond(req)
        try:
            self.send_response(code)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            # the client gave up (timeout) while we were being slow: nothing to do
            self.close_connection = True


class FakeServer:
    """Base of the loopback fakes: scripting, request log, lifecycle.

    Args:
        default: the behaviour once the queue is empty — a behaviour, or a function
            ``(ReceivedRequest) -> behaviour``. Defaults to ``sql("SELECT 1")``.
        latency: seconds added to every request (before any behaviour ``delay``).
        script: behaviours to queue right away.
    """

    def __init__(self, default: Behaviour | Handler | None = None, *, latency: float = 0.0,
                 script: Iterable[Behaviour] = ()) -> None:
        self.default: Behaviour | Handler = default if default is not None else sql("SELECT 1")
        self.latency = latency
        self._queue: deque[Behaviour | Handler] = deque(script)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.requests: list[ReceivedRequest] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeServer:
        """Bind 127.0.0.1 on a free port and serve in a background thread."""
        if self._server is not None:
            return self
        ensure_no_proxy()
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _RequestHandler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"{type(self).__name__}-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; slow responses in flight wake up and are abandoned."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not started: call start() or use `with`")
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash, no path)."""
        return f"http://127.0.0.1:{self.port}"

    # -- scripting ------------------------------------------------------------------------

    def queue(self, *behaviours: Behaviour | Handler) -> FakeServer:
        """Append behaviours, consumed one per request before falling back to ``default``."""
        with self._lock:
            self._queue.extend(behaviours)
        return self

    def reset(self) -> None:
        """Forget queued behaviours and received requests."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    @property
    def calls(self) -> int:
        """How many requests were received."""
        with self._lock:
            return len(self.requests)

    @property
    def last(self) -> ReceivedRequest:
        """The most recent request."""
        with self._lock:
            if not self.requests:
                raise AssertionError(f"{type(self).__name__} received no request")
            return self.requests[-1]

    def _next(self, req: ReceivedRequest) -> Behaviour:
        with self._lock:
            self.requests.append(req)
            item = self._queue.popleft() if self._queue else self.default
        return item(req) if callable(item) else item

    def _respond(self, req: ReceivedRequest) -> tuple[int, dict[str, str], bytes]:
        if not self.accepts(req):
            return self._error(404, "not_found_error", f"no route for {req.method} {req.path}", {})
        behaviour = self._next(req)
        delay = self.latency + behaviour.delay
        if delay > 0:
            self._stopping.wait(delay)
        if isinstance(behaviour, Raw):
            if behaviour.error_type is not None:
                return self._error(behaviour.status, behaviour.error_type,
                                   behaviour.message or "error", dict(behaviour.headers))
            return behaviour.status, _json_headers(behaviour.headers), _encode(behaviour.body)
        return 200, _json_headers({}), _encode(self.render_answer(behaviour, req))

    # -- provider specifics (overridden) -------------------------------------------------

    def accepts(self, req: ReceivedRequest) -> bool:
        return req.method == "POST"

    def render_answer(self, answer: Answer, req: ReceivedRequest) -> Any:
        raise NotImplementedError

    def error_body(self, status_code: int, error_type: str, message: str) -> Any:
        return {"error": {"type": error_type, "message": message}}

    def _error(self, code: int, error_type: str, message: str,
               headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        return code, _json_headers(headers), _encode(self.error_body(code, error_type, message))


def _json_headers(extra: Mapping[str, str]) -> dict[str, str]:
    headers = {"content-type": "application/json"}
    headers.update({k.lower(): v for k, v in extra.items()})
    return headers


def _encode(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body).encode()


def _answer_json(answer: Answer) -> str:
    """The model text for an answer: the JSON the generators ask for."""
    if answer.text is not None:
        return answer.text
    if answer.refusal is not None:
        return json.dumps({"kind": "refusal", "sql": None, "refusal_reason": answer.refusal})
    return json.dumps({"kind": "sql", "sql": answer.sql, "refusal_reason": None})


# --------------------------------------------------------------------------- Anthropic


class FakeAnthropic(FakeServer):
    """The Anthropic Messages API: ``POST /v1/messages``.

    An answer is a message whose content is an optional ``thinking`` block (when the request
    asked for thinking and the answer allows it) and a ``text`` block holding the JSON
    ``{"kind", "sql", "refusal_reason"}`` that ``messages.parse`` validates.

    >>> FakeAnthropic().render_answer(sql("SELECT 1", thinking=False),
    ...     ReceivedRequest("POST", "/v1/messages", {}, b'{"model": "m"}', 0.0))["content"]
    [{'type': 'text', 'text': '{"kind": "sql", "sql": "SELECT 1", "refusal_reason": null}'}]
    """

    def accepts(self, req: ReceivedRequest) -> bool:
        return req.method == "POST" and req.path.split("?")[0].rstrip("/") == "/v1/messages"

    def render_answer(self, answer: Answer, req: ReceivedRequest) -> Any:
        body = req.json or {}
        content: list[dict[str, Any]] = []
        thinking = body.get("thinking") or {}
        if answer.thinking and thinking.get("type") not in (None, "disabled"):
            content.append({"type": "thinking", "thinking": "Map the question onto the marts.",
                            "signature": "fake-signature"})
        content.append({"type": "text", "text": _answer_json(answer)})
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-fake"),
            "content": content,
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": answer.usage[0], "output_tokens": answer.usage[1]},
        }

    def error_body(self, status_code: int, error_type: str, message: str) -> Any:
        return {"type": "error", "error": {"type": error_type, "message": message}}


# --------------------------------------------------------------------------- OpenAI


class FakeOpenAI(FakeServer):
    """OpenAI chat completions: ``POST /v1/chat/completions`` (and ``/chat/completions``).

    An answer is a ``chat.completion`` whose single choice's message content is the JSON
    ``{"sql": ..., "refusal": ...}`` (or the answer's verbatim ``text``).
    """

    def accepts(self, req: ReceivedRequest) -> bool:
        return req.method == "POST" and req.path.split("?")[0].rstrip("/") in (
            "/v1/chat/completions", "/chat/completions")

    def render_answer(self, answer: Answer, req: ReceivedRequest) -> Any:
        body = req.json or {}
        if answer.text is not None:
            content = answer.text
        else:
            content = json.dumps({"sql": answer.sql, "refusal": answer.refusal})
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "gpt-fake"),
            "system_fingerprint": "fp_fake",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }],
            "usage": {"prompt_tokens": answer.usage[0], "completion_tokens": answer.usage[1],
                      "total_tokens": sum(answer.usage)},
        }

    def error_body(self, status_code: int, error_type: str, message: str) -> Any:
        return {"error": {"message": message, "type": error_type, "param": None,
                          "code": error_type}}


# --------------------------------------------------------------------------- team service


def _default_shape(answer: Answer, req: ReceivedRequest) -> Any:
    if answer.text is not None:
        return {"sql": answer.text, "refusal": None}
    return {"sql": answer.sql, "refusal": answer.refusal}


class FakeTextToSqlService(FakeServer):
    """A team's own text-to-SQL service: any POST path, JSON in, JSON out.

    ``shape(answer, request)`` builds the response JSON; the default is
    ``{"sql": ..., "refusal": ...}``. For nested responses, e.g.::

        FakeTextToSqlService(shape=lambda a, r: {"choices": [{"sql": a.sql}],
                                                 "meta": {"why": a.refusal}})
    """

    def __init__(self, default: Behaviour | Handler | None = None, *, latency: float = 0.0,
                 script: Iterable[Behaviour] = (),
                 shape: Callable[[Answer, ReceivedRequest], Any] | None = None) -> None:
        super().__init__(default, latency=latency, script=script)
        self.shape = shape or _default_shape

    def render_answer(self, answer: Answer, req: ReceivedRequest) -> Any:
        return self.shape(answer, req)

    def error_body(self, status_code: int, error_type: str, message: str) -> Any:
        return {"error": message, "status": status_code}


# --------------------------------------------------------------------------- contexts


def make_context(case_id: str = "q01", run_index: int = 0,
                 question: str = "How many orders were placed last month?",
                 prompt: str | None = "PROMPT: How many orders were placed last month?") -> Any:
    """A small, realistic :class:`GenerationContext`, built directly (no retrieval needed).

    >>> make_context("q07", 2).case_id, make_context().as_of.isoformat()
    ('q07', '2025-06-30')
    """
    from sqleval_pipeline.generation.base import Example, GenerationContext

    return GenerationContext(
        case_id=case_id,
        run_index=run_index,
        question=question,
        as_of=dt.date(2025, 6, 30),
        schema_context=("CREATE TABLE marts.fct_orders (order_id BIGINT, order_date DATE, "
                        "amount DECIMAL(12,2));"),
        glossary_context="orders: count of distinct order_id",
        examples=[Example(case_id="dev01", question="How many orders in total?",
                          sql="SELECT count(*) FROM marts.fct_orders")],
        prompt=prompt,
    )
