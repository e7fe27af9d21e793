"""JSON over HTTP: OpenAI-compatible chat completions (``openai`` SDK) and plain HTTP (``httpx2``).

Both clients are built with their library's retries off; callers retry through
:func:`~sqleval_pipeline.providers.retry.call_with_retries`. Failures become
:class:`~sqleval_pipeline.providers.errors.ProviderError` codes:

=========================================  ==============================================
failure                                    code
=========================================  ==============================================
an HTTP error status (``>= 400``)          by status (:func:`~.errors.map_http_status`)
timeout (``APITimeoutError``, httpx2's)    ``provider_timeout``
connection failure / other transport       ``unreachable``
a body that is not (valid) JSON            ``malformed_response``
=========================================  ==============================================

>>> error_message_of({"error": {"message": "model not found"}}, "raw text")
'model not found'
>>> error_message_of(None, "  <html>  Bad   gateway </html> ")
'<html> Bad gateway </html>'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx2

from sqleval_pipeline.providers.errors import (
    ProviderError,
    map_http_status,
    parse_retry_after,
    timeout_error,
    truncate_raw,
    unreachable_error,
)

__all__ = [
    "create_chat_completion", "error_message_of", "http_client", "map_openai_error",
    "openai_client", "read_json_response", "send_json",
]

if TYPE_CHECKING:
    import openai


def _openai():
    """The OpenAI SDK, imported when a client is made or an error mapped: importing it takes
    about 0.35 s (500 modules), which every process that only loads the generators would
    otherwise pay."""
    import openai  # heavy, and needed only by a call to an OpenAI-compatible server

    return openai


def openai_mapped_errors() -> tuple[type[Exception], ...]:
    """What :func:`create_chat_completion` maps (anything else, e.g. a bug, propagates untouched)."""
    sdk = _openai()
    return (sdk.APIStatusError, sdk.APIConnectionError, sdk.APIResponseValidationError, ValueError)


# --------------------------------------------------------------------------- OpenAI-compatible


def openai_client(api_key: str, *, base_url: str, timeout_s: float) -> openai.OpenAI:
    """An ``openai.OpenAI`` client for ``base_url`` with the SDK's retries off."""
    return _openai().OpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_s)


def map_openai_error(exc: Exception, *, base_url: str, timeout_s: float,
                     credential_hint: str | None) -> ProviderError:
    """The :class:`ProviderError` for an exception of :func:`openai_mapped_errors`.

    >>> str(map_openai_error(ValueError("Expecting value"), base_url="http://vllm:8000/v1",
    ...                      timeout_s=5, credential_hint=None))
    'malformed_response: http://vllm:8000/v1 sent a body that is not JSON: Expecting value'
    """
    sdk = _openai()
    if isinstance(exc, sdk.APIStatusError):
        body = exc.body
        message = exc.message
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            message = body["message"]
        return map_http_status(
            exc.status_code, message, retry_after=parse_retry_after(exc.response.headers),
            raw_response=truncate_raw(json.dumps(body, default=str) if body is not None else None),
            provider=base_url, credential_hint=credential_hint,
        )
    if isinstance(exc, sdk.APITimeoutError):
        return timeout_error(base_url, timeout_s)
    if isinstance(exc, sdk.APIConnectionError):
        return unreachable_error(base_url, exc.__cause__ or exc)
    if isinstance(exc, sdk.APIResponseValidationError):
        return ProviderError("malformed_response", f"{base_url} sent an invalid response: {exc}",
                             retryable=True)
    if isinstance(exc, ValueError):  # the body is not JSON
        return ProviderError("malformed_response", f"{base_url} sent a body that is not JSON: {exc}",
                             retryable=True)
    raise TypeError(f"not an OpenAI SDK error to map: {type(exc).__name__}")


def create_chat_completion(client: openai.OpenAI, params: dict[str, Any], *, base_url: str,
                           timeout_s: float, credential_hint: str | None) -> Any:
    """``client.chat.completions.create(**params)`` with every failure mapped to a
    :class:`ProviderError` (``base_url`` names the server in messages)."""
    try:
        return client.chat.completions.create(**params)
    except openai_mapped_errors() as exc:
        raise map_openai_error(exc, base_url=base_url, timeout_s=timeout_s,
                               credential_hint=credential_hint) from exc


# --------------------------------------------------------------------------- plain HTTP


def http_client(*, headers: Mapping[str, str], timeout_s: float,
                transport: httpx2.BaseTransport | None = None) -> httpx2.Client:
    """An ``httpx2.Client`` sending ``headers`` with every request (no retries)."""
    return httpx2.Client(headers=dict(headers), timeout=timeout_s, transport=transport)


def send_json(client: httpx2.Client, method: str, url: str, body: Any, *,
              timeout_s: float) -> httpx2.Response:
    """Send ``body`` as JSON; a timeout or transport failure becomes a :class:`ProviderError`.

    The response is returned whatever its status; read it with :func:`read_json_response`.
    """
    try:
        return client.request(method, url, json=body)
    except httpx2.TimeoutException as exc:
        raise timeout_error(url, timeout_s) from exc
    except httpx2.TransportError as exc:
        raise unreachable_error(url, exc) from exc


def read_json_response(response: httpx2.Response, *, url: str,
                       credential_hint: str | None = None) -> tuple[Any, str | None]:
    """``(document, raw)`` from a response: its decoded JSON and its (capped) text.

    Raises:
        ProviderError: an HTTP error status (by :func:`~.errors.map_http_status`, with the
            body's error message), or a body that is not JSON (``malformed_response``).
    """
    raw = truncate_raw(response.text)
    if response.status_code >= 400:
        raise map_http_status(response.status_code, _error_message(response),
                              retry_after=parse_retry_after(response.headers),
                              raw_response=raw, provider=url, credential_hint=credential_hint)
    try:
        document = response.json()
    except ValueError as exc:
        raise ProviderError("malformed_response",
                            f"{url} answered HTTP {response.status_code} with a body that "
                            f"is not JSON: {exc}", retryable=True, raw_response=raw) from exc
    return document, raw


def _error_message(response: httpx2.Response) -> str:
    """A short message from an error response: its JSON ``error``/``message``, or the text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    return error_message_of(body, response.text, response.reason_phrase)


def error_message_of(body: Any, text: str, reason_phrase: str | None = None) -> str:
    """A short message from an error body: its ``error``/``message``/``detail`` string (or
    ``{"message": ...}``), else the text on one line (at most 300 characters)."""
    if isinstance(body, dict):
        for key in ("error", "message", "detail"):
            value = body.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return value["message"]
    flat = " ".join(text.split())
    return (flat[:300] + "…") if len(flat) > 300 else (flat or reason_phrase or "error")
