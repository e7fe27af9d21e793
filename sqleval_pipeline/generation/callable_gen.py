"""A system under test that lives in Python: ``package.module:function``.

The function is called as ``function(question, context, **options)`` — ``question`` is the
case's question, ``context`` the full :class:`GenerationContext` (schema, glossary, as-of
date, examples, rendered prompt), ``options`` the configuration's ``options`` mapping — and
returns one of:

- a non-empty ``str``: the SQL;
- ``None`` or an empty string: a refusal ("the function returned no SQL");
- a ``dict``: ``{"sql": ...}`` or ``{"refusal": "<reason>"}`` (``kind``/``refusal_reason``
  accepted too);
- a :class:`GenerationOutput`, passed through (latency filled in when it has no usage).

An exception raised by the function is a retryable ``server_error`` (its traceback is kept
as the raw response); a :class:`ProviderError` it raises passes through unchanged; a
return value of another type is a non-retryable ``malformed_response``.

>>> from sqleval_pipeline.configs import CallableSettings
>>> gen = CallableGenerator(CallableSettings(target="builtins:str"))  # str(question, ctx) fails
>>> gen.name
'callable:builtins:str'
"""

from __future__ import annotations

import importlib
import time
import traceback
from collections.abc import Callable
from typing import Any

from sqleval_pipeline.configs import CallableSettings
from sqleval_pipeline.generation._common import GeneratorSetupError, interpret_answer
from sqleval_pipeline.generation.base import GenerationContext, GenerationOutput
from sqleval_pipeline.providers.errors import ProviderError, truncate_raw
from sqleval_pipeline.pipeline.records import Usage

NO_SQL_REASON = "the function returned no SQL"


class CallableTargetError(GeneratorSetupError):
    """The ``package.module:function`` target cannot be imported or is not callable."""


def import_target(target: str) -> Callable[..., Any]:
    """Import ``package.module:function`` (dots after the colon walk attributes).

    >>> import_target("json:dumps")([1])
    '[1]'
    >>> import_target("json:nope")
    Traceback (most recent call last):
    ...
    sqleval_pipeline.generation.callable_gen.CallableTargetError: callable target 'json:nope': module 'json' has no attribute 'nope'
    """
    module_name, sep, attr_path = target.partition(":")
    if not sep or not module_name or not attr_path:
        raise CallableTargetError(f"callable target {target!r}: expected 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        hint = ("" if missing == module_name.split(".")[0] or missing == module_name else
                f" (needed while importing {module_name!r})")
        raise CallableTargetError(
            f"callable target {target!r}: cannot import module {module_name!r}: no module named "
            f"{missing!r}{hint}; is its package installed in this environment or on PYTHONPATH?"
        ) from exc
    except Exception as exc:  # the module itself failed while importing
        raise CallableTargetError(
            f"callable target {target!r}: importing module {module_name!r} raised "
            f"{type(exc).__name__}: {exc}") from exc
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CallableTargetError(
                f"callable target {target!r}: module {module_name!r} has no attribute "
                f"{attr_path!r}") from None
    if not callable(obj):
        raise CallableTargetError(
            f"callable target {target!r}: {attr_path!r} is a {type(obj).__name__}, not a function")
    return obj


class CallableGenerator:
    """Calls a Python function for each case.

    Args:
        settings: the configuration's ``generator`` block (``target``, ``options``).
        function: use this function instead of importing ``settings.target`` (tests,
            embedding the harness in a notebook).

    Raises:
        CallableTargetError: the target cannot be imported or is not callable.
    """

    def __init__(self, settings: CallableSettings, *,
                 function: Callable[..., Any] | None = None) -> None:
        self.settings = settings
        self.name = f"callable:{settings.target}"
        self.function = function if function is not None else import_target(settings.target)

    def generate(self, ctx: GenerationContext) -> GenerationOutput:
        """Call the function and normalise what it returns."""
        started = time.perf_counter()
        try:
            result = self.function(ctx.question, ctx, **self.settings.options)
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderError(
                "server_error",
                f"{self.settings.target} raised {type(exc).__name__}: {exc}",
                retryable=True, raw_response=truncate_raw(traceback.format_exc()),
            ) from exc
        latency_ms = round((time.perf_counter() - started) * 1000.0, 3)
        return self._output(result, latency_ms)

    def close(self) -> None:
        """Call the target's ``close`` attribute when it has one (e.g. a callable object)."""
        closer = getattr(self.function, "close", None)
        if callable(closer):
            closer()

    def _output(self, result: Any, latency_ms: float) -> GenerationOutput:
        if isinstance(result, GenerationOutput):
            if result.usage is None:
                return result.model_copy(update={"usage": Usage(latency_ms=latency_ms)})
            if result.usage.latency_ms is None:
                usage = result.usage.model_copy(update={"latency_ms": latency_ms})
                return result.model_copy(update={"usage": usage})
            return result
        usage = Usage(latency_ms=latency_ms)
        if result is None or (isinstance(result, str) and not result.strip()):
            return GenerationOutput(kind="refusal", refusal_reason=NO_SQL_REASON, usage=usage)
        if isinstance(result, str):
            return GenerationOutput(kind="sql", sql=result.strip(), usage=usage)
        if isinstance(result, dict):
            try:
                kind, sql, reason = interpret_answer(result)
            except ValueError as exc:
                raise ProviderError(
                    "malformed_response",
                    f"{self.settings.target} returned a dict that is not an answer: {exc}; "
                    'expected {"sql": "..."} or {"refusal": "<reason>"}',
                    raw_response=truncate_raw(repr(result))) from exc
            model = result.get("model") if isinstance(result.get("model"), str) else None
            return GenerationOutput(kind=kind, sql=sql, refusal_reason=reason, usage=usage,  # type: ignore[arg-type]
                                    model=model)
        raise ProviderError(
            "malformed_response",
            f"{self.settings.target} returned a {type(result).__name__}; expected the SQL (str), "
            "None or '' (a refusal), a dict {'sql'|'refusal'} or a GenerationOutput",
            raw_response=truncate_raw(repr(result)))
