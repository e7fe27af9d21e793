"""Retries with exponential backoff for provider calls (429/5xx/timeouts), honouring retry-after.

Used by the attempt runner (each system-under-test call) and by the LLM judge.

:func:`call_with_retries` calls ``fn()``; when it raises a :class:`ProviderError` with
``retryable=True`` it waits and tries again, up to ``max_retries`` times. The wait before
retry *n* (1-based) is drawn from ``[d/2, d]`` with ``d = min(max_delay, base_delay * 2**(n-1))``
("equal jitter", so concurrent workers spread out), and is never less than the error's
``retry_after``. The jitter comes from a seeded :class:`random.Random`, so a run's waits are
reproducible; pass ``rng`` to share one generator, or ``jitter=False`` for exact doubling.

Waits are bounded: a single wait longer than ``max_wait`` (default :data:`MAX_WAIT_S`, 60 s:
a ``retry-after: 3600`` of a rate-limited provider) or one that would take the call's waits
past ``max_total_wait`` (default :data:`MAX_TOTAL_WAIT_S`, 120 s) is not made: the error is
re-raised at once with ``gave_up`` saying why (the attempt is then an ERROR, and an outage
batch is retried by running it again). Every wait is reported through ``on_retry``.

Non-retryable errors are re-raised at once; when retries run out the last error is
re-raised. Either way the error carries ``retries`` (how many retries were made). Any other
exception (a bug) propagates untouched.

>>> from sqleval_pipeline.providers.errors import ProviderError
>>> waits, outcomes = [], iter([ProviderError("rate_limited", "429", retryable=True, retry_after=3),
...                             ProviderError("server_error", "500", retryable=True), "SELECT 1"])
>>> def call():
...     item = next(outcomes)
...     if isinstance(item, Exception):
...         raise item
...     return item
>>> call_with_retries(call, max_retries=3, sleep=waits.append)
('SELECT 1', 2)
>>> waits[0] >= 3 and 0.5 <= waits[1] <= 1.0
True
>>> def hour():
...     raise ProviderError("rate_limited", "429", retryable=True, retry_after=3600)
>>> try:
...     call_with_retries(hour, max_retries=3, sleep=waits.append)
... except ProviderError as exc:
...     print(exc.retries, exc.gave_up)
0 the provider asked to wait 3600 s, more than the 60 s cap
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from sqleval_pipeline.providers.errors import ProviderError

__all__ = ["DEFAULT_SEED", "backoff_delay", "call_with_retries"]

T = TypeVar("T")

#: the default jitter seed: reproducible waits unless the caller passes its own ``rng``
DEFAULT_SEED = 20250630
#: the longest single wait before a retry (a larger ``retry-after`` ends the call instead)
MAX_WAIT_S = 60.0
#: the most one call may spend waiting between retries, all waits together
MAX_TOTAL_WAIT_S = 120.0


def backoff_delay(retry_number: int, *, base_delay: float = 0.5, max_delay: float = 30.0,
                  retry_after: float | None = None, rng: random.Random | None = None,
                  jitter: bool = True) -> float:
    """Seconds to wait before retry ``retry_number`` (1 for the first retry).

    >>> backoff_delay(1, jitter=False), backoff_delay(3, jitter=False), backoff_delay(20, jitter=False)
    (0.5, 2.0, 30.0)
    >>> backoff_delay(1, retry_after=7.5)
    7.5
    >>> 1.0 <= backoff_delay(3, rng=random.Random(1)) <= 2.0
    True
    """
    if retry_number < 1:
        raise ValueError(f"retry_number starts at 1, got {retry_number}")
    if base_delay < 0 or max_delay < 0:
        raise ValueError("base_delay and max_delay must be >= 0")
    ceiling = min(max_delay, base_delay * (2.0 ** min(retry_number - 1, 1000)))
    if jitter:
        rng = rng if rng is not None else random.Random(DEFAULT_SEED + retry_number)
        delay = ceiling / 2.0 + rng.random() * ceiling / 2.0
    else:
        delay = ceiling
    if retry_after is not None and retry_after > delay:
        delay = float(retry_after)
    return delay


def call_with_retries(
    fn: Callable[[], T],
    *,
    max_retries: int,
    base_delay: float = 0.5,
    max_delay: float = 30.0,
    sleep: Callable[[float], object] = time.sleep,
    on_retry: Callable[[ProviderError, int, float], object] | None = None,
    rng: random.Random | None = None,
    jitter: bool = True,
    max_wait: float = MAX_WAIT_S,
    max_total_wait: float = MAX_TOTAL_WAIT_S,
) -> tuple[T, int]:
    """Call ``fn`` until it succeeds or retries run out; return ``(result, retries_used)``.

    Args:
        fn: the call, e.g. ``lambda: generator.generate(ctx)``.
        max_retries: retries after the first attempt (0: a single attempt).
        base_delay, max_delay: the backoff's first ceiling and its cap, in seconds (a larger
            ``retry_after`` from the provider is still honoured in full).
        sleep: how to wait (tests pass a fake that records the delays).
        on_retry: called as ``on_retry(error, retry_number, delay)`` before each wait.
        rng: the jitter source; default ``random.Random(DEFAULT_SEED)`` per call.
        jitter: False for exact doubling (``base_delay * 2**(n-1)``, capped).
        max_wait, max_total_wait: the bounds on one wait and on all of them (see module doc).

    Raises:
        ProviderError: the first non-retryable error, or the last retryable one when
            ``max_retries`` are used up, or a wait is over its bounds (``error.gave_up``);
            ``error.retries`` says how many retries were made.
    """
    if max_retries < 0:
        raise ValueError(f"max_retries must be >= 0, got {max_retries}")
    rng = rng if rng is not None else random.Random(DEFAULT_SEED)
    retries = 0
    waited = 0.0
    while True:
        try:
            return fn(), retries
        except ProviderError as exc:
            exc.retries = retries  # type: ignore[attr-defined]
            exc.gave_up = None  # type: ignore[attr-defined]
            if not exc.retryable or retries >= max_retries:
                raise
            delay = backoff_delay(retries + 1, base_delay=base_delay, max_delay=max_delay,
                                  retry_after=exc.retry_after, rng=rng, jitter=jitter)
            if delay > max_wait:
                exc.gave_up = (f"the provider asked to wait {delay:.0f} s, more than the "  # type: ignore[attr-defined]
                               f"{max_wait:.0f} s cap")
                raise
            if waited + delay > max_total_wait:
                exc.gave_up = (f"retrying would wait {waited + delay:.0f} s in all, more than the "  # type: ignore[attr-defined]
                               f"{max_total_wait:.0f} s cap")
                raise
            retries += 1
            waited += delay
            if on_retry is not None:
                on_retry(exc, retries, delay)
            sleep(delay)
