"""call_with_retries: backoff, jitter, retry-after, exhaustion — with a fake sleep."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqleval_pipeline.generation.base import ProviderError
from sqleval_pipeline.generation.retry import backoff_delay, call_with_retries


def scripted(*outcomes):
    """A call that raises/returns the outcomes in order, counting calls."""
    items = iter(outcomes)
    calls = []

    def call():
        calls.append(1)
        item = next(items)
        if isinstance(item, BaseException):
            raise item
        return item

    call.calls = calls
    return call


def retryable(code="server_error", retry_after=None):
    return ProviderError(code, "transient", retryable=True, retry_after=retry_after)


def test_success_first_time_no_sleep(waits):
    assert call_with_retries(scripted("SELECT 1"), max_retries=3, sleep=waits.append) == ("SELECT 1", 0)
    assert waits == []


def test_exponential_backoff_without_jitter(waits):
    fn = scripted(retryable(), retryable(), retryable(), "ok")
    assert call_with_retries(fn, max_retries=5, base_delay=0.5, sleep=waits.append, jitter=False) == ("ok", 3)
    assert waits == [0.5, 1.0, 2.0]


def test_jitter_within_bounds_and_reproducible():
    def run():
        waits = []
        fn = scripted(*[retryable()] * 6, "ok")
        call_with_retries(fn, max_retries=6, base_delay=1, max_delay=8, sleep=waits.append)
        return waits

    first, second = run(), run()
    assert first == second  # seeded: reproducible
    for n, wait in enumerate(first, start=1):
        ceiling = min(8, 2 ** (n - 1))
        assert ceiling / 2 <= wait <= ceiling
    assert len(set(first)) > 1


def test_custom_rng_changes_jitter_but_stays_in_bounds():
    waits_a, waits_b = [], []
    call_with_retries(scripted(retryable(), "ok"), max_retries=1, base_delay=4, sleep=waits_a.append,
                      rng=random.Random(1))
    call_with_retries(scripted(retryable(), "ok"), max_retries=1, base_delay=4, sleep=waits_b.append,
                      rng=random.Random(2))
    assert waits_a != waits_b and all(2 <= w <= 4 for w in waits_a + waits_b)


def test_retry_after_is_a_floor_even_above_max_delay(waits):
    fn = scripted(retryable("rate_limited", retry_after=45), retryable("rate_limited", retry_after=0.01), "ok")
    call_with_retries(fn, max_retries=3, base_delay=0.5, max_delay=30, sleep=waits.append)
    assert waits[0] == 45
    assert 0.5 <= waits[1] <= 1.0  # a tiny retry-after does not shorten the backoff


def test_exhausted_reraises_last_error_with_retries(waits):
    last = retryable("provider_timeout")
    fn = scripted(retryable(), retryable("rate_limited", retry_after=1), last)
    with pytest.raises(ProviderError) as info:
        call_with_retries(fn, max_retries=2, sleep=waits.append)
    assert info.value is last and info.value.retries == 2 and len(waits) == 2


def test_non_retryable_raised_at_once(waits):
    err = ProviderError("auth_error", "bad key")
    fn = scripted(err, "never")
    with pytest.raises(ProviderError) as info:
        call_with_retries(fn, max_retries=5, sleep=waits.append)
    assert info.value is err and info.value.retries == 0 and waits == [] and len(fn.calls) == 1


def test_non_retryable_after_retries_reports_count(waits):
    fn = scripted(retryable(), ProviderError("bad_request", "no"))
    with pytest.raises(ProviderError) as info:
        call_with_retries(fn, max_retries=5, sleep=waits.append)
    assert info.value.code == "bad_request" and info.value.retries == 1


def test_zero_retries_is_single_attempt(waits):
    with pytest.raises(ProviderError) as info:
        call_with_retries(scripted(retryable()), max_retries=0, sleep=waits.append)
    assert info.value.retries == 0 and waits == []


def test_other_exceptions_propagate_untouched(waits):
    with pytest.raises(KeyError):
        call_with_retries(scripted(KeyError("bug")), max_retries=3, sleep=waits.append)
    assert waits == []


def test_on_retry_sees_error_number_and_delay(waits):
    seen = []
    fn = scripted(retryable("rate_limited", retry_after=2), "ok")
    call_with_retries(fn, max_retries=1, sleep=waits.append, on_retry=lambda e, n, d: seen.append((e.code, n, d)))
    assert seen == [("rate_limited", 1, waits[0])]


def test_invalid_arguments():
    with pytest.raises(ValueError):
        call_with_retries(lambda: 1, max_retries=-1)
    with pytest.raises(ValueError):
        backoff_delay(0)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 80), base=st.floats(0, 10), cap=st.floats(0, 60),
       retry_after=st.none() | st.floats(0, 600), seed=st.integers(0, 2**32))
def test_delay_bounds_property(n, base, cap, retry_after, seed):
    delay = backoff_delay(n, base_delay=base, max_delay=cap, retry_after=retry_after, rng=random.Random(seed))
    ceiling = min(cap, base * 2 ** (n - 1))
    assert delay >= ceiling / 2 - 1e-9
    if retry_after is not None:
        assert delay >= retry_after
    assert delay <= max(ceiling, retry_after or 0) + 1e-9
