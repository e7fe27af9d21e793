"""The Anthropic SDK (2.14) wire format: building the client and mapping its errors.

Used by the Claude generator (``generation.anthropic_gen``) and the LLM judge
(``judging.llm``). The SDK's own retries are off (``max_retries=0``): callers retry through
:func:`~sqleval_pipeline.providers.retry.call_with_retries`, so a retry is visible and
counted. SDK exceptions become :class:`~sqleval_pipeline.providers.errors.ProviderError`
codes:

==============================  =====================================================
SDK exception                   code
==============================  =====================================================
``APIStatusError``              by HTTP status (:func:`~.errors.map_http_status`)
``APITimeoutError``             ``provider_timeout``
``APIConnectionError``          ``unreachable``
``APIResponseValidationError``  ``malformed_response``
``ValueError`` (parse failed)   ``malformed_response`` (the model's JSON did not validate)
==============================  =====================================================

>>> client = anthropic_client(None, timeout_s=5, missing_key_message="set ANTHROPIC_API_KEY")
Traceback (most recent call last):
...
sqleval_pipeline.providers.errors.ProviderError: missing_credentials: set ANTHROPIC_API_KEY
>>> client = anthropic_client("sk-ant-test", timeout_s=5, missing_key_message="unused",
...                           base_url="http://127.0.0.1:9")
>>> client.max_retries, str(client.base_url)
(0, 'http://127.0.0.1:9')
>>> client.close()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqleval_pipeline.providers.errors import (
    ProviderError,
    body_text,
    map_http_status,
    parse_retry_after,
    short_message,
    timeout_error,
    truncate_raw,
    unreachable_error,
)

if TYPE_CHECKING:
    import anthropic

__all__ = ["anthropic_client", "map_anthropic_error", "mapped_errors", "no_parsed_output", "parse_mapping_errors"]


def _sdk():
    """The Anthropic SDK, imported when a client is made or an error mapped: importing it takes
    about 0.85 s (3,000 modules), which every process that only loads the generators, the
    judges or the pipeline's definitions would otherwise pay."""
    import anthropic  # heavy, and needed only by a call to the provider

    return anthropic


def mapped_errors() -> tuple[type[Exception], ...]:
    """What :func:`parse_mapping_errors` maps (anything else, e.g. a bug, propagates untouched)."""
    sdk = _sdk()
    return (sdk.APIStatusError, sdk.APIConnectionError, sdk.APIResponseValidationError, ValueError)


def anthropic_client(api_key: str | None, *, timeout_s: float, missing_key_message: str,
                     base_url: str | None = None) -> anthropic.Anthropic:
    """An ``anthropic.Anthropic`` client with the SDK's retries off.

    Raises:
        ProviderError: ``missing_credentials`` (with ``missing_key_message``) when there is
            no key — at construction, before any call is made.
    """
    if not api_key:
        raise ProviderError("missing_credentials", missing_key_message)
    kwargs: dict[str, Any] = {"api_key": api_key, "max_retries": 0, "timeout": timeout_s}
    if base_url:
        kwargs["base_url"] = base_url
    return _sdk().Anthropic(**kwargs)


def map_anthropic_error(exc: Exception, *, base_url: object, timeout_s: float,
                        credential_hint: str, subject: str) -> ProviderError:
    """The :class:`ProviderError` for an exception of :func:`mapped_errors` (module table).

    ``subject`` names who answered in a parse failure (``"the model"``, ``"the judge"``).

    >>> str(map_anthropic_error(ValueError("1 validation error"), base_url="x", timeout_s=1,
    ...                         credential_hint="k", subject="the judge"))
    "malformed_response: the judge's answer is not the expected JSON: 1 validation error"
    """
    sdk = _sdk()
    if isinstance(exc, sdk.APIStatusError):
        return map_http_status(
            exc.status_code, getattr(exc, "api_message", None) or str(exc),
            retry_after=parse_retry_after(exc.response.headers),
            raw_response=truncate_raw(body_text(exc.body)), provider="anthropic",
            credential_hint=credential_hint,
        )
    if isinstance(exc, sdk.APITimeoutError):
        return timeout_error("anthropic", timeout_s)
    if isinstance(exc, sdk.APIConnectionError):
        return unreachable_error(f"the anthropic API at {base_url}", exc.__cause__ or exc)
    if isinstance(exc, sdk.APIResponseValidationError):
        return ProviderError("malformed_response", f"anthropic response did not validate: {exc}",
                             retryable=True, raw_response=body_text(exc.body))
    if isinstance(exc, ValueError):  # the body or the model's JSON did not parse/validate
        return ProviderError("malformed_response",
                             f"{subject}'s answer is not the expected JSON: {short_message(exc)}",
                             retryable=True)
    raise TypeError(f"not an Anthropic SDK error to map: {type(exc).__name__}")


def parse_mapping_errors(client: anthropic.Anthropic, request: dict[str, Any], *, timeout_s: float,
                         credential_hint: str, subject: str) -> Any:
    """``client.messages.parse(**request)`` with every SDK failure mapped to a
    :class:`ProviderError` (shared by the generator and the LLM judge)."""
    try:
        return client.messages.parse(**request)
    except mapped_errors() as exc:
        raise map_anthropic_error(exc, base_url=client.base_url, timeout_s=timeout_s,
                                  credential_hint=credential_hint, subject=subject) from exc


def no_parsed_output(what: str, stop_reason: str | None, raw: str | None) -> ProviderError:
    """The retryable ``malformed_response`` for a message with no parsed output.

    >>> no_parsed_output("the model returned no JSON answer", "max_tokens", None).message
    'the model returned no JSON answer (stop_reason=max_tokens, raise max_tokens)'
    """
    return ProviderError(
        "malformed_response",
        f"{what} (stop_reason={stop_reason}"
        + (", raise max_tokens" if stop_reason == "max_tokens" else "") + ")",
        retryable=True, raw_response=raw)
