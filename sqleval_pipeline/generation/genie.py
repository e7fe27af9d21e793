"""Databricks AI/BI Genie as a system under test: its Conversation API, one conversation per
question.

For every case and run:

1. ``POST {host}/api/2.0/genie/spaces/{space_id}/start-conversation`` with
   ``{"content": <question>}`` — a **new conversation** every time, so no answer is shaped by
   an earlier question (follow-up messages are never sent);
2. ``GET .../conversations/{conversation_id}/messages/{message_id}`` until the message's
   ``status`` is terminal: ``COMPLETED``, ``FAILED``, ``CANCELLED`` or
   ``QUERY_RESULT_EXPIRED`` (``SUBMITTED``, ``FETCHING_METADATA``, ``FILTERING_CONTEXT``,
   ``ASKING_AI``, ``PENDING_WAREHOUSE``, ``EXECUTING_QUERY`` and any status not known yet mean
   "still working"). The waits between polls start at ``poll_interval_s`` and grow by
   ``poll_backoff`` up to ``poll_max_interval_s``; after ``max_wait_s`` in all the attempt is
   a ``provider_timeout`` error that says so and is not retried (the wait was the bound);
3. optionally (``fetch_query_result: true``) ``GET .../messages/{message_id}/attachments/
   {attachment_id}/query-result``, whose ``statement_response`` rows (``result.data_array``,
   every value a string or null) are decoded by ``manifest.schema.columns[].type_name``
   (:func:`decode_rows`).

Only the question is sent: no schema, glossary, examples or prompt. Requests carry
``Authorization: Bearer <token from settings.token_env>``.

The answer is read from the final message's ``attachments``:

* a ``query`` attachment with a non-empty ``query.query`` is the SQL (the first one; its
  ``description`` is kept in the raw response);
* otherwise its ``text`` attachments (and ``suggested_questions``) are a **refusal** with that
  text;
* ``FAILED``: a ``server_error`` carrying Genie's ``error`` (``type: error``), not retried;
  ``CANCELLED`` likewise; a ``COMPLETED`` message with no usable attachment a retryable
  ``malformed_response``.

An HTTP error of any call (``{"error_code", "message"}``) ends the attempt with its mapped
:class:`ProviderError`; the attempt runner retries 429 (honouring ``retry-after``) and 5xx by
asking again from step 1, in a new conversation. The attempt's ``raw_response`` is a JSON
record of the exchange: conversation and message ids, the statuses polled, the final message
and, with ``fetch_query_result``, the result's manifest and the decoded rows as a
:class:`~sqleval_pipeline.results.ResultSet` JSON (``vendor_result``) — or why they are
missing (``vendor_result_error``).

>>> decode_rows([{"name": "n", "type_name": "DOUBLE"}, {"name": "ok", "type_name": "BOOLEAN"}],
...             [["3.336E8", "true"], [None, "false"]]).rows
[[333600000.0, True], [None, False]]
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import quote, urlsplit

import httpx2

from sqleval_pipeline.configs import GenieSettings
from sqleval_pipeline.generation._common import NO_REASON
from sqleval_pipeline.generation.base import GenerationContext, GenerationOutput
from sqleval_pipeline.generation.vendor_common import bearer_token, call_json, vendor_client
from sqleval_pipeline.providers.errors import ProviderError, truncate_raw
from sqleval_pipeline.pipeline.records import Usage
from sqleval_pipeline.results import ResultSet

#: statuses after which a message changes no more
TERMINAL_STATUSES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "QUERY_RESULT_EXPIRED"})
#: statuses whose attachments are read as the answer
ANSWERED_STATUSES = frozenset({"COMPLETED", "QUERY_RESULT_EXPIRED"})

#: Databricks ``type_name`` → the DuckDB type the decoded column is stored under
_TYPES = {"BOOLEAN": "BOOLEAN", "BYTE": "TINYINT", "SHORT": "SMALLINT", "INT": "INTEGER",
          "LONG": "BIGINT", "FLOAT": "FLOAT", "DOUBLE": "DOUBLE", "DATE": "DATE",
          "TIMESTAMP": "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_NTZ": "TIMESTAMP",
          "STRING": "VARCHAR", "CHAR": "VARCHAR", "NULL": "VARCHAR"}


def _column_type(column: dict[str, Any]) -> str:
    name = str(column.get("type_name") or "STRING").upper()
    if name == "DECIMAL":
        precision, scale = column.get("type_precision"), column.get("type_scale")
        if isinstance(precision, int) and isinstance(scale, int):
            return f"DECIMAL({precision},{scale})"
        return "DECIMAL(38,18)"
    if name == "TIMESTAMP" and str(column.get("type_text") or "").upper() == "TIMESTAMP_NTZ":
        return "TIMESTAMP"
    # INTERVAL, BINARY, ARRAY, MAP, STRUCT, USER_DEFINED_TYPE: kept as the text Genie sent
    return _TYPES.get(name, "VARCHAR")


def _decode(value: Any, duck_type: str) -> Any:
    if value is None:
        return None
    text = str(value)
    if duck_type == "BOOLEAN":
        lowered = text.strip().lower()
        if lowered not in ("true", "false"):
            raise ValueError(f"{text!r} is not a BOOLEAN")
        return lowered == "true"
    if duck_type in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT"):
        return int(text)
    if duck_type in ("FLOAT", "DOUBLE"):
        return float(text)
    if duck_type.startswith("DECIMAL"):
        try:
            return Decimal(text)
        except InvalidOperation:
            raise ValueError(f"{text!r} is not a DECIMAL") from None
    if duck_type == "DATE":
        return dt.date.fromisoformat(text)
    if duck_type.startswith("TIMESTAMP"):
        return dt.datetime.fromisoformat(text)
    return text


def decode_rows(columns: list[dict[str, Any]], data_array: list[list[Any]]) -> ResultSet:
    """Genie's rows (strings and nulls) as typed values, by each column's ``type_name``:
    BOOLEAN ``"true"``/``"false"``; BYTE/SHORT/INT/LONG integers; FLOAT/DOUBLE floats
    (``"3.336E8"``, ``"NaN"``, ``"Infinity"``); DECIMAL :class:`~decimal.Decimal`; DATE and
    TIMESTAMP ISO dates and times; null is None; everything else the text as sent.

    Raises:
        ValueError: a value that does not read as its column's type, or a row of another width.

    >>> rs = decode_rows([{"name": "d", "type_name": "DECIMAL", "type_precision": 10,
    ...                    "type_scale": 2}, {"name": "day", "type_name": "DATE"}],
    ...                  [["12.50", "2025-06-30"]])
    >>> rs.types, rs.rows
    (['DECIMAL(10,2)', 'DATE'], [[Decimal('12.50'), datetime.date(2025, 6, 30)]])
    """
    names = [str(c.get("name") or f"col{i}") for i, c in enumerate(columns)]
    types = [_column_type(c) for c in columns]
    rows = []
    for r, row in enumerate(data_array):
        if not isinstance(row, list) or len(row) != len(types):
            raise ValueError(f"row {r} has {len(row) if isinstance(row, list) else 'no'} values "
                             f"for {len(types)} columns")
        try:
            rows.append([_decode(v, t) for v, t in zip(row, types, strict=True)])
        except ValueError as exc:
            raise ValueError(f"row {r}: {exc}") from None
    return ResultSet(columns=names, types=types, rows=rows)


def _first_str(*values: Any) -> str | None:
    for value in values:
        if isinstance(value, str) and value:
            return value
    return None


class GenieGenerator:
    """A Genie space answering one question per new conversation (module doc).

    Args:
        settings: the configuration's ``generator`` block.
        timeout_s: per-call timeout in seconds (the configuration's ``timeout_s``).
        transport: an ``httpx2`` transport (tests, custom TLS); default: the network.
        sleep, clock: how to wait between polls and what time it is (tests pass fakes; the
            attributes of the same names can be replaced after construction).

    Raises:
        ProviderError: ``missing_credentials`` when ``settings.token_env`` is unset — at
            construction, before any case is asked.
    """

    def __init__(self, settings: GenieSettings, *, timeout_s: float = 60,
                 transport: httpx2.BaseTransport | None = None,
                 sleep: Callable[[float], object] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self.sleep = sleep
        self.clock = clock
        self.space_url = (f"{settings.host.rstrip('/')}/api/2.0/genie/spaces/"
                          f"{quote(settings.space_id, safe='')}")
        self.name = f"genie:{urlsplit(settings.host).netloc}/{settings.space_id}"
        token = bearer_token(settings.token_env, vendor="the genie generator",
                             example="<personal access token>")
        self._client = vendor_client(token, None, timeout_s=timeout_s, transport=transport)
        self._hint = f"the token in {settings.token_env}"

    def generate(self, ctx: GenerationContext) -> GenerationOutput:
        """Ask the case's question in a new conversation; SQL or a refusal, or a :class:`ProviderError`."""
        started = time.perf_counter()
        start, _ = self._call("POST", f"{self.space_url}/start-conversation",
                              {"content": ctx.question})
        if not isinstance(start, dict):
            raise ProviderError("malformed_response", "start-conversation answered "
                                f"{type(start).__name__}, not an object", retryable=True)
        message = start.get("message") if isinstance(start.get("message"), dict) else {}
        conversation = start.get("conversation") if isinstance(start.get("conversation"), dict) else {}
        conversation_id = _first_str(start.get("conversation_id"), message.get("conversation_id"),
                                     conversation.get("id"))
        message_id = _first_str(start.get("message_id"), message.get("message_id"), message.get("id"))
        if not conversation_id or not message_id:
            raise ProviderError("malformed_response", "start-conversation's answer has no "
                                "conversation_id and message_id", retryable=True,
                                raw_response=truncate_raw(json.dumps(start)))
        record: dict[str, Any] = {"conversation_id": conversation_id, "message_id": message_id,
                                  "statuses": []}
        message_url = f"{self.space_url}/conversations/{conversation_id}/messages/{message_id}"
        message = self._poll(message_url, message, record)
        record["message"] = message
        output = self._answer(message, message_url, record)
        output.usage = Usage(latency_ms=round((time.perf_counter() - started) * 1000.0, 3))
        output.raw_response = truncate_raw(json.dumps(record, default=str))
        return output

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> GenieGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------

    def _call(self, method: str, url: str, body: Any = None) -> tuple[Any, str | None]:
        return call_json(self._client, method, url, body, timeout_s=self.timeout_s,
                         credential_hint=self._hint)

    def _poll(self, url: str, message: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
        """GET the message until its status is terminal, within ``max_wait_s`` (module doc)."""
        s = self.settings
        began = self.clock()
        slept = 0.0  # the waits asked for: the bound holds even if the clock stands still
        delay = s.poll_interval_s
        status = message.get("status")
        if isinstance(status, str):
            record["statuses"].append(status)
        while status not in TERMINAL_STATUSES:
            waited = max(self.clock() - began, slept)
            if waited >= s.max_wait_s:
                record["message"] = message
                raise ProviderError(
                    "provider_timeout",
                    f"Genie did not finish the message within max_wait_s = {s.max_wait_s:g} s "
                    f"(last status {status or 'none'} after {len(record['statuses'])} status "
                    "reads); raise max_wait_s or check the space's warehouse", retryable=False,
                    raw_response=truncate_raw(json.dumps(record, default=str)))
            wait = min(delay, s.max_wait_s - waited)
            self.sleep(wait)
            slept += wait
            delay = min(delay * s.poll_backoff, s.poll_max_interval_s)
            polled, raw = self._call("GET", url)
            if not isinstance(polled, dict):
                raise ProviderError("malformed_response", f"{url} answered "
                                    f"{type(polled).__name__}, not a message", retryable=True,
                                    raw_response=raw)
            message = polled
            status = message.get("status")
            record["statuses"].append(status if isinstance(status, str) else None)
        return message

    def _answer(self, message: dict[str, Any], url: str, record: dict[str, Any]) -> GenerationOutput:
        status = message["status"]
        raw = truncate_raw(json.dumps(record, default=str))
        if status == "FAILED":
            error = message.get("error") if isinstance(message.get("error"), dict) else {}
            what = ": ".join(str(x) for x in (error.get("type"), error.get("error")) if x)
            raise ProviderError("server_error", f"Genie answered FAILED: {what or 'no reason given'}",
                                raw_response=raw)
        if status not in ANSWERED_STATUSES:
            raise ProviderError("server_error", f"Genie answered {status}: the message was not "
                                "answered", raw_response=raw)
        attachments = [a for a in message.get("attachments") or [] if isinstance(a, dict)]
        texts: list[str] = []
        suggestions: list[str] = []
        for attachment in attachments:
            query = attachment.get("query") if isinstance(attachment.get("query"), dict) else None
            sql = query.get("query") if query else None
            if isinstance(sql, str) and sql.strip():
                if self.settings.fetch_query_result:
                    self._fetch_result(url, attachment, status, record)
                return GenerationOutput(kind="sql", sql=sql.strip())
            text = attachment.get("text") if isinstance(attachment.get("text"), dict) else None
            if text and isinstance(text.get("content"), str) and text["content"].strip():
                texts.append(text["content"].strip())
            asked = attachment.get("suggested_questions")
            if isinstance(asked, dict):
                suggestions += [q.strip() for q in asked.get("questions") or []
                                if isinstance(q, str) and q.strip()]
        if not texts and not suggestions:
            raise ProviderError("malformed_response", f"Genie answered {status} with no query "
                                f"and no text ({len(attachments)} attachments)", retryable=True,
                                raw_response=raw)
        reason = " ".join(texts)
        if suggestions:
            reason = (reason + " " if reason else "") + "Suggestions: " + "; ".join(suggestions)
        return GenerationOutput(kind="refusal", refusal_reason=reason or NO_REASON)

    def _fetch_result(self, url: str, attachment: dict[str, Any], status: str,
                      record: dict[str, Any]) -> None:
        """Genie's own rows for the query, into ``record`` (never fails the attempt)."""
        attachment_id = attachment.get("attachment_id") or attachment.get("id")
        if status == "QUERY_RESULT_EXPIRED" or not attachment_id:
            record["vendor_result_error"] = ("the result has expired" if attachment_id else
                                             "the query attachment has no attachment_id")
            return
        try:
            document, _ = self._call("GET", f"{url}/attachments/{attachment_id}/query-result")
        except ProviderError as exc:
            record["vendor_result_error"] = f"{exc.code}: {exc.message}"
            return
        statement = document.get("statement_response") if isinstance(document, dict) else None
        if not isinstance(statement, dict):
            record["vendor_result_error"] = "the query-result answer has no statement_response"
            return
        state = (statement.get("status") or {}).get("state")
        manifest = statement.get("manifest") or {}
        record["query_result"] = {"statement_id": statement.get("statement_id"), "state": state,
                                  "manifest": manifest}
        if state not in (None, "SUCCEEDED"):
            record["vendor_result_error"] = f"the statement's state is {state}"
            return
        columns = ((manifest.get("schema") or {}).get("columns")) or []
        data = (statement.get("result") or {}).get("data_array") or []
        try:
            record["vendor_result"] = decode_rows(columns, data).to_json()
        except ValueError as exc:
            record["vendor_result_error"] = f"the rows do not read as their types: {exc}"
        if manifest.get("truncated") or (isinstance(manifest.get("total_row_count"), int)
                                         and manifest["total_row_count"] > len(data)):
            record["vendor_result_partial"] = True
