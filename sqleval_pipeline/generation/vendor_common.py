"""What the vendor generators (``cortex_analyst``, ``genie``) share: the bearer token, JSON
calls with the vendor's error body named, and server-sent events.

Everything goes through the plain-HTTP helpers of :mod:`sqleval_pipeline.providers.http`
(one ``httpx2`` client per generator, its statuses mapped to
:class:`~sqleval_pipeline.providers.errors.ProviderError` codes by
:func:`~sqleval_pipeline.providers.errors.map_http_status`): 429 (with ``retry-after``), 408,
409 and 5xx are retryable, 401/403 are ``auth_error``, other 4xx ``bad_request``. Both vendors
answer errors with a JSON body carrying ``message``; its ``code`` / ``error_code`` and
``request_id`` are added to the error's message so a failed attempt says which request to
look up. The token is never part of a message, a record or a log line: messages name the
environment variable that holds it.

>>> vendor_details({"message": "bad model", "code": "390318", "request_id": "r-1"})
'code 390318, request_id r-1'
>>> vendor_details({"error_code": "RESOURCE_EXHAUSTED", "message": "slow down"})
'error_code RESOURCE_EXHAUSTED'
>>> vendor_details("<html>") is None
True
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2

from sqleval_pipeline.providers.env import env_value
from sqleval_pipeline.providers.errors import (
    ProviderError,
    timeout_error,
    truncate_raw,
    unreachable_error,
)
from sqleval_pipeline.providers.http import http_client, read_json_response, send_json

__all__ = ["bearer_token", "call_json", "sse_or_json", "vendor_client", "vendor_details"]


def bearer_token(token_env: str, *, vendor: str, example: str) -> str:
    """The token in ``token_env``; a ``missing_credentials`` error naming the variable if unset.

    >>> bearer_token("SQLEVAL_SURELY_UNSET_TOKEN", vendor="the genie generator", example="dapi…")
    Traceback (most recent call last):
    ...
    sqleval_pipeline.providers.errors.ProviderError: missing_credentials: the genie generator needs a token: set SQLEVAL_SURELY_UNSET_TOKEN (settings.token_env) in the environment, e.g. `export SQLEVAL_SURELY_UNSET_TOKEN=dapi…`
    """
    token = env_value(token_env)
    if not token:
        raise ProviderError(
            "missing_credentials",
            f"{vendor} needs a token: set {token_env} (settings.token_env) in the environment, "
            f"e.g. `export {token_env}={example}`")
    return token


def vendor_client(token: str, extra_headers: dict[str, str] | None, *, timeout_s: float,
                  transport: httpx2.BaseTransport | None = None) -> httpx2.Client:
    """An ``httpx2`` client sending ``Authorization: Bearer <token>`` and JSON headers."""
    headers = {"authorization": f"Bearer {token}", "accept": "application/json",
               "content-type": "application/json", **(extra_headers or {})}
    return http_client(headers=headers, timeout_s=timeout_s, transport=transport)


def vendor_details(body: Any) -> str | None:
    """``code …, request_id …`` from a vendor's error body (Snowflake: ``code``, ``request_id``;
    Databricks: ``error_code``); None when it carries neither."""
    if not isinstance(body, dict):
        return None
    parts = []
    for key in ("code", "error_code", "request_id"):
        value = body.get(key)
        if isinstance(value, str | int) and str(value).strip():
            if key == "error_code" and "code" in body:
                continue  # Snowflake repeats ``code`` as the deprecated ``error_code``
            parts.append(f"{key} {value}")
    return ", ".join(parts) or None


def _with_details(exc: ProviderError, response: httpx2.Response) -> ProviderError:
    try:
        details = vendor_details(response.json())
    except ValueError:
        details = None
    if not details:
        return exc
    out = ProviderError(exc.code, f"{exc.message} ({details})", retryable=exc.retryable,
                        retry_after=exc.retry_after, raw_response=exc.raw_response)
    return out


def read_vendor_json(response: httpx2.Response, *, url: str,
                     credential_hint: str) -> tuple[Any, str | None]:
    """:func:`~sqleval_pipeline.providers.http.read_json_response`, the vendor's error code and
    request id added to an error's message."""
    try:
        return read_json_response(response, url=url, credential_hint=credential_hint)
    except ProviderError as exc:
        if response.status_code >= 400:
            raise _with_details(exc, response) from exc
        raise


def call_json(client: httpx2.Client, method: str, url: str, body: Any, *, timeout_s: float,
              credential_hint: str) -> tuple[Any, str | None]:
    """One JSON call: ``(document, raw text)``, or the :class:`ProviderError` of its failure."""
    response = send_json(client, method, url, body, timeout_s=timeout_s)
    return read_vendor_json(response, url=url, credential_hint=credential_hint)


def sse_or_json(client: httpx2.Client, url: str, body: Any, *, timeout_s: float,
                credential_hint: str) -> tuple[Any | None, Iterator[tuple[str, Any]] | None]:
    """POST ``body`` asking for server-sent events.

    Returns ``(document, None)`` when the server answered plain JSON after all, or
    ``(None, events)`` where ``events`` yields ``(event name, parsed JSON data)`` — the
    caller must exhaust or close it (it holds the connection). An error status is raised at
    once as the :class:`ProviderError` of that status (its body read as the vendor's error).
    """
    stream = client.sse(url, method="POST", json=body)
    try:
        source = stream.__enter__()
    except httpx2.TimeoutException as exc:
        raise timeout_error(url, timeout_s) from exc
    except httpx2.TransportError as exc:
        raise unreachable_error(url, exc) from exc
    response = source.response
    content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if response.status_code >= 400 or content_type != "text/event-stream":
        try:
            response.read()
            return read_vendor_json(response, url=url, credential_hint=credential_hint)[0], None
        except httpx2.TimeoutException as exc:
            raise timeout_error(url, timeout_s) from exc
        except httpx2.TransportError as exc:
            raise unreachable_error(url, exc) from exc
        finally:
            stream.__exit__(None, None, None)

    def events() -> Iterator[tuple[str, Any]]:
        try:
            for sse in source:
                try:
                    data = json.loads(sse.data) if sse.data.strip() else None
                except ValueError as exc:
                    raise ProviderError(
                        "malformed_response", f"{url} sent a {sse.event!r} event whose data is "
                        f"not JSON: {exc}", retryable=True,
                        raw_response=truncate_raw(sse.data)) from exc
                yield sse.event, data
        except httpx2.TimeoutException as exc:
            raise timeout_error(url, timeout_s) from exc
        except httpx2.TransportError as exc:
            raise unreachable_error(url, exc) from exc
        finally:
            stream.__exit__(None, None, None)

    return None, events()
