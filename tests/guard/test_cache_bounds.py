"""Bounded caches (issue 21, class 7): memory stays flat whatever texts come through the guard.

The filter's decision cache kept each allowed statement's sqlglot tree keyed by its text: one
allowed 20 KB text cost about 8.5 MB, so about 2,700 distinct large statements exhausted a
23 GB machine. Every guard cache is now bounded in entries *and* bytes, keyed by a digest of
the text, and keeps verdicts, never trees: the filter's, and each worker's DuckDB view cache.
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest
from sqlglot import exp

from sqleval_pipeline.guard import sandbox
from sqleval_pipeline.guard.database import fresh_connection, open_guarded_database
from sqleval_pipeline.guard.lru import LRU, deep_size, text_key
from sqleval_pipeline.guard.statement_filter import StatementFilter
from tests.conftest import demo_policy

MB = 1 << 20


def big_allowed(i: int, size: int = 19_900) -> str:
    """A distinct allowed statement of ``size`` bytes: some structure, a long string literal."""
    head = (f"SELECT {i} AS k, order_id, net_revenue_inr FROM fct_orders WHERE order_id IN "
            f"({', '.join(str(i + j) for j in range(60))}) AND status <> '")
    tail = "' ORDER BY order_id LIMIT 5"
    return head + "x" * (size - len(head) - len(tail)) + tail


def _traced(fn) -> int:
    """Bytes still allocated after ``fn()`` (tracemalloc), garbage collected."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()


@pytest.mark.slow  # 1,500 large statements through the filter, traced
def test_distinct_large_statements_keep_the_filter_flat_once_its_cache_is_full(monkeypatch):
    """Memory stops growing once the verdict cache is full: measured at two points past it
    (the cache made 500 entries here, so that 1,500 statements fill it three times over; the
    bundled size keeps the same verdicts under the same byte bound)."""
    monkeypatch.setattr(StatementFilter, "CACHE_ENTRIES", 500)
    sf = StatementFilter(demo_policy(), database_names={"snap-test"})
    marks: dict[int, int] = {}

    def feed():
        for i in range(1500):
            sql = big_allowed(i)
            v = sf.check(sql)
            assert v.allowed, v.message
            if i + 1 in (1000, 1500):
                gc.collect()
                marks[i + 1] = tracemalloc.get_traced_memory()[0]

    grown = _traced(feed)
    print(f"\nfilter after 1,500 distinct 20 KB statements: {grown / MB:.1f} MB traced "
          f"({len(sf._cache)} verdicts cached)")
    assert len(sf._cache) == 500  # full since the 500th statement
    assert grown < 8 * MB, f"{grown / MB:.0f} MB"
    assert marks[1500] - marks[1000] < 1 * MB, "memory still grows once the cache is full"
    assert sf._cache.nbytes <= StatementFilter.CACHE_BYTES


def test_a_cached_verdict_keeps_no_tree_and_no_text():
    sf = StatementFilter(demo_policy())
    sql = big_allowed(1)
    v = sf.check(sql)
    assert v.allowed
    cached = list(sf._cache._data.items())
    assert len(cached) == 1
    key, (verdict, weight) = cached[0]
    assert key == text_key(sql) and len(key) == 32  # a digest, not the 20 KB text
    for value in vars(verdict).values():
        assert not isinstance(value, exp.Expression)
    assert deep_size(verdict) < 4096 and weight >= deep_size(verdict)


def test_the_byte_bound_evicts_oldest_first():
    c: LRU[str, str] = LRU(1000, max_bytes=10_000, weigh=lambda k, v: len(v))
    for i in range(50):
        c.put(f"k{i}", "v" * 1000)
    assert c.nbytes <= 10_000 and len(c) < 10
    assert c.get("k49") is not None and c.get("k0") is None
    c.put("huge", "v" * 20_000)  # heavier than the bound on its own: not kept
    assert c.get("huge") is None and c.nbytes <= 10_000
    c.put("k49", "w")  # replacing an entry releases its old weight
    assert c.get("k49") == "w" and c.nbytes <= 10_000


def test_deep_size_counts_what_a_value_keeps_alive():
    assert deep_size("x" * 100_000) > 100_000
    assert deep_size({"a": ["x" * 50_000, ("y" * 50_000,)]}) > 100_000
    shared = "z" * 10_000
    assert deep_size([shared, shared]) < 12_000  # counted once


@pytest.fixture()
def worker_policy(guard, monkeypatch):
    monkeypatch.setattr(sandbox, "_WORKER_POLICY", guard.policy)
    monkeypatch.setattr(sandbox, "_VIEW_CACHE", LRU(sandbox._VIEW_CACHE.size, max_bytes=sandbox._VIEW_CACHE.max_bytes))
    return guard.policy


def test_the_worker_view_cache_is_keyed_by_digest_and_bounded(worker_policy, serving_snapshot):
    """The worker's cache of DuckDB's views (run here in-process, the same code)."""
    root = open_guarded_database(serving_snapshot.path, worker_policy)
    try:
        for i in range(40):
            reply = sandbox._run_one(root, fresh_connection, {
                "sql": big_allowed(i), "timeout_s": 5.0, "row_cap": 10, "max_result_bytes": 1 << 20,
                "max_cell_bytes": 1 << 16, "inspect_only": True})
            assert reply["ok"], reply
    finally:
        root.close()
    cache = sandbox._VIEW_CACHE
    assert len(cache) == 40
    assert all(isinstance(k, bytes) and len(k) == 32 for k in cache._data)
    assert cache.max_bytes <= 64 * MB and cache.nbytes < 40 * 20_000  # no 20 KB text kept per entry


def test_the_guarded_executor_stays_flat(guard):
    """Distinct large statements through every layer: the parent keeps verdicts, not trees."""
    texts = [big_allowed(100_000 + i) for i in range(400)]

    def run():
        for sql in texts:
            r = guard.execute(sql)
            assert r.ok, r.describe()

    grown = _traced(run)
    print(f"\nexecutor after 400 distinct 20 KB statements: {grown / MB:.1f} MB traced")
    assert grown < 8 * MB, f"{grown / MB:.0f} MB"
