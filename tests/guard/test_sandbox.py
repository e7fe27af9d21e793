"""Process sandbox: bombs and crashes are contained, workers are replaced, the caller survives."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from sqleval_pipeline.guard.sandbox import WorkerPool

SPLIT_BOMB = "SELECT string_split(repeat('ab,', 300000000), ',')"
CROSS_JOIN = "SELECT count(*) FROM fct_order_items a, fct_order_items b, fct_order_items c"


@pytest.fixture()
def pool(serving_snapshot, guard_policy):
    p = WorkerPool(serving_snapshot.path, guard_policy, size=1)
    yield p
    p.close()


def _limits(pid: int) -> str:
    with open(f"/proc/{pid}/limits") as fh:
        return fh.read()


def test_workers_are_resource_limited(pool, guard_policy):
    (pid,) = pool.worker_pids()
    limits = _limits(pid)
    as_line = next(line for line in limits.splitlines() if line.startswith("Max address space"))
    assert str(guard_policy.address_space_mb << 20) in as_line
    fsize = next(line for line in limits.splitlines() if line.startswith("Max file size"))
    assert fsize.split()[3:5] == ["0", "0"]
    assert os.readlink(f"/proc/{pid}/cwd") == os.path.realpath(pool.workdir)


def test_wall_clock_kill_replaces_the_worker(pool):
    (before,) = pool.worker_pids()
    t0 = time.perf_counter()
    r = pool.run(SPLIT_BOMB, timeout_s=0.3)
    elapsed = time.perf_counter() - t0
    assert not r.ok and r.sandbox_reason in {"wall_clock_kill", None}
    assert elapsed < 0.3 + pool.policy.kill_grace_s + 2.0
    if r.sandbox_reason == "wall_clock_kill":
        assert pool.replaced == 1 and pool.worker_pids() != [before]
    ok = pool.run("SELECT count(*) FROM fct_orders")
    assert ok.ok and ok.rows == [(60000,)]


def test_crash_mid_query_is_reported_and_replaced(pool):
    (pid,) = pool.worker_pids()
    threading.Timer(0.3, os.kill, args=(pid, signal.SIGKILL)).start()
    r = pool.run(CROSS_JOIN, timeout_s=10)
    assert not r.ok and r.sandbox_reason == "worker_crashed" and "SIGKILL" in r.error_message
    assert pool.replaced == 1
    assert pool.run("SELECT 1").ok


def test_dead_idle_worker_is_replaced_before_use(pool):
    (pid,) = pool.worker_pids()
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    r = pool.run("SELECT 42")
    assert r.ok and r.rows == [(42,)] and r.worker_pid != pid


def test_workers_are_recycled(serving_snapshot, guard_policy):
    policy = guard_policy.with_overrides({"sandbox": {"max_queries_per_worker": 2}})
    with WorkerPool(serving_snapshot.path, policy, size=1) as p:
        pids = {p.run("SELECT 1").worker_pid for _ in range(5)}
        assert len(pids) >= 2 and p.replaced >= 2


@pytest.mark.parametrize("sql", [
    "SELECT length(repeat('x', 2000000000))", "SELECT len(range(300000000))", SPLIT_BOMB,
    "SELECT list_sum(range(1000000000))",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
])
def test_bombs_are_contained_through_the_guard(guard, sql):
    me = os.getpid()
    t0 = time.perf_counter()
    r = guard.execute(sql)
    assert r.status in {"timeout", "refused"} and r.layer in {"database", "sandbox", "cap"}, r.describe()
    assert time.perf_counter() - t0 < guard.policy.statement_timeout_s + guard.policy.kill_grace_s + 3
    assert os.getpid() == me
    after = guard.execute("SELECT count(*) FROM dim_customers")
    assert after.ok and after.result.rows == [[8000]]
    assert len(guard.pool.worker_pids()) == guard.pool.size


def test_concurrent_queries(guard):
    results = []

    def work():
        for _ in range(5):
            results.append(guard.execute("SELECT count(*) FROM fct_orders WHERE status = 'delivered'"))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 20 and all(r.ok for r in results)
    assert len({tuple(r.result.rows[0]) for r in results}) == 1
