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


def test_a_kill_grace_given_for_a_call_only_lowers_the_policys(serving_snapshot, guard_policy):
    """A worker that does not answer (a bomb DuckDB cannot interrupt) is killed after the
    timeout plus the call's kill grace when that is lower than the policy's, else the policy's."""
    bomb = "SELECT length(repeat('x', 2000000000))"
    with WorkerPool(serving_snapshot.path, guard_policy, size=1) as p:
        lowered = p.run(bomb, timeout_s=0.3, kill_grace_s=0.2)
        assert lowered.sandbox_reason == "wall_clock_kill", lowered
        assert "no answer within 0.5 s" in lowered.error_message
        higher = p.run(bomb, timeout_s=0.3, kill_grace_s=guard_policy.kill_grace_s + 30)
        assert higher.sandbox_reason == "wall_clock_kill", higher
        assert f"no answer within {0.3 + guard_policy.kill_grace_s:.1f} s" in higher.error_message
        assert p.run("SELECT 1").ok and p.replaced == 2


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


# --------------------------------------------------------------------------- worker poisoning

from sqleval_pipeline.guard import sandbox as sandbox_mod  # noqa: E402
from sqleval_pipeline.guard.database import fresh_connection, open_guarded_database  # noqa: E402

#: trips DuckDB's memory limit (OutOfMemoryException) under the test policy
MEMORY_BOMB = "SELECT length(string_agg(repeat('x', 1000000), '')) FROM range(5000)"
LEGIT = "SELECT count(*), sum(quantity) FROM fct_order_items"


def test_memory_refusals_recycle_the_worker(serving_snapshot, guard_policy):
    with WorkerPool(serving_snapshot.path, guard_policy, size=2) as p:
        expected = p.run(LEGIT)
        assert expected.ok
        bombs = [p.run(MEMORY_BOMB) for _ in range(2)]
        assert all(not b.ok and sandbox_mod.memory_failure(b.error_class, b.error_message) for b in bombs)
        assert p.recycled["memory_failure"] == 2
        assert not {b.worker_pid for b in bombs} & set(p.worker_pids())  # both poisoned workers are gone
        # an address-space bomb (interrupted or refused): whatever its outcome, the pool serves on
        big = p.run("SELECT list(range(100000000))")
        assert not big.ok
        # a legitimate query on every worker
        legit = [p.run(LEGIT) for _ in range(4)]
        assert all(r.ok and r.rows == expected.rows for r in legit), [r.error_message for r in legit]
        assert {r.worker_pid for r in legit} == set(p.worker_pids())


def test_worker_above_the_rss_threshold_is_recycled(serving_snapshot, guard_policy):
    policy = guard_policy.with_overrides({"sandbox": {"recycle_rss_mb": 64}})
    with WorkerPool(serving_snapshot.path, policy, size=1) as p:
        first = p.run("SELECT 1")
        rss, vm = sandbox_mod.process_memory(p.worker_pids()[0])
        assert rss and vm
        second = p.run("SELECT 1")
        assert first.ok and second.ok and first.worker_pid != second.worker_pid
        assert p.recycled["rss"] >= 1
    with WorkerPool(serving_snapshot.path, guard_policy, size=1) as p:  # default: kept
        assert len({p.run("SELECT 1").worker_pid for _ in range(3)}) == 1 and p.replaced == 0


def test_worker_above_the_vm_threshold_is_recycled(serving_snapshot, guard_policy):
    policy = guard_policy.with_overrides({"sandbox": {"recycle_vm_mb": 64}})
    with WorkerPool(serving_snapshot.path, policy, size=1) as p:
        pids = {p.run("SELECT 1").worker_pid for _ in range(3)}
        assert len(pids) == 3 and p.recycled["vm"] == 3


@pytest.mark.parametrize("cls, msg, expected", [
    ("OutOfMemoryException", "Out of Memory Error: failed to allocate data of size 512.0 MiB", True),
    ("MemoryError", "", True),
    ("InvalidInputException", "Failed to allocate block of 4294967296 bytes (bad allocation)", True),
    ("MemoryError", "reply could not be sent: ", True),
    ("BinderException", "Binder Error: column x not found", False),
    (None, None, False),
])
def test_memory_failure(cls, msg, expected):
    assert sandbox_mod.memory_failure(cls, msg) is expected


def test_start_failure_does_not_leak_the_work_directory(serving_snapshot, guard_policy, monkeypatch):
    made = []
    real = sandbox_mod.tempfile.mkdtemp

    def mkdtemp(*a, **kw):
        made.append(real(*a, **kw))
        return made[-1]

    def broken(self, timeout=0):
        raise RuntimeError("start-up failed for another reason")

    monkeypatch.setattr(sandbox_mod.tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(sandbox_mod._Worker, "wait_ready", broken)
    with pytest.raises(RuntimeError, match="another reason"):
        WorkerPool(serving_snapshot.path, guard_policy, size=2)
    assert made and not os.path.exists(made[0])


# --------------------------------------------------------------------------- file access


def test_the_database_layer_cannot_read_the_serving_file(serving_snapshot, guard_policy):
    import duckdb

    root = open_guarded_database(serving_snapshot.path, guard_policy)
    try:
        for path in (serving_snapshot.path, serving_snapshot.path.resolve()):
            for fn in ("read_blob", "read_text"):
                with fresh_connection(root) as con, pytest.raises(duckdb.PermissionException):
                    con.execute(f"SELECT * FROM {fn}('{path}')").fetchall()
        with fresh_connection(root) as con:  # the served tables still read fine
            assert con.execute("SELECT count(*) FROM fct_orders").fetchone() == (60000,)
    finally:
        root.close()


def test_the_parent_never_reads_more_than_the_wire_limit(serving_snapshot, guard_policy, monkeypatch):
    """Even a worker that does not check its reply's size cannot make the parent read more."""
    with WorkerPool(serving_snapshot.path, guard_policy, size=1) as p:
        (w,) = list(p._all)
        real_send = w.conn.send
        w.conn.send = lambda req: real_send({**req, "max_wire_bytes": None})  # the worker won't check
        monkeypatch.setattr(sandbox_mod, "wire_limit", lambda policy: 50_000)
        r = p.run("SELECT repeat('x', 1000) FROM fct_orders LIMIT 200")  # ~200 KB pickled
        assert not r.ok and r.sandbox_reason == "result_too_large" and r.rows == []
        assert p.recycled["oversized_reply"] == 1
        ok = p.run("SELECT repeat('x', 10) FROM fct_orders LIMIT 20")
        assert ok.ok and len(ok.rows) == 20
