"""Benchmark of guarded execution against raw DuckDB on the golden reference queries.

    .venv/bin/python benchmarks/bench_guard.py [--snapshot PATH] [--repeat N] [--json OUT]

Reports, in one run and interleaved query by query:

* guarded execution (filter → pinned clock → sandboxed worker → cap) against raw DuckDB
  execution of the same (clock-pinned) SQL — median, p95 and the median ratio — twice: with
  the texts repeated (the filter and each worker cache their decision per text, as when a
  configuration runs every case three times) and *cold*, every text new to the guard (a
  unique trailing comment per repetition, so no decision is reused). Raw is
  measured two ways: on one warm connection held open (the cheapest possible), and with a
  short-lived read-only connection per query (what is required for anything that
  must not hold the file);
* the statement filter's own cost per query (median, p95), and the cost of each check on its
  own: the character scan (``guard/characters.py``, when present), sqlglot (the filter
  without it), DuckDB's parse tree (``json_serialize_sql``) and DuckDB's unoptimized bound
  plan (``json_serialize_plan``) — both measured on a fresh connection of a locked database,
  as the worker does (``guard/duckdb_view.py``);
* ``--before FILE``: a previous ``--json`` output to compare the guarded median with;
* worker-pool throughput in queries/second, one client thread per worker;
* time for bombs to be contained (and for the pool to answer again);
* ``--adversarial``: the statement filter's time on the seeded adversarial literals and shapes
  of ``tests/guard/test_parent_bounds.py`` (exponents, long digit strings, nesting, long
  token streams, chains, pathological Unicode): worst and median;
* ``--memory N``: memory of the statement filter after N distinct allowed 20 KB statements
  (traced allocations and the process's resident size).

Targets: guarded/raw (warm connection) median ratio ≤ 1.5 for a repeated text, ≤ 2 for a cold
one, filter ≤ 2 ms median. The *cold floor* line shows what no guard keeping DuckDB's two views
can go below: the parse tree and bound plan plus the execution on a warm raw connection, as a
multiple of the execution alone (docs/guardrails.md, "Cost of a text new to the guard").
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqleval_pipeline.demo import location  # noqa: E402
from sqleval_pipeline.project import load_project  # noqa: E402
from sqleval_pipeline import snapshot as snap  # noqa: E402
from sqleval_pipeline.golden import load_golden  # noqa: E402
from sqleval_pipeline.guard.clock import pin_clock  # noqa: E402
from sqleval_pipeline.guard.executor import GuardedExecutor  # noqa: E402
from sqleval_pipeline.guard.statement_filter import StatementFilter  # noqa: E402
from tests.guard.test_cache_bounds import big_allowed  # noqa: E402
from tests.guard.test_parent_bounds import adversarial_texts  # noqa: E402


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def resolve(snapshot: Path | None):
    pinned = snap.read_pinned(location.SNAPSHOT_MANIFEST_DIR)
    if snapshot is None:
        if pinned is None:
            sys.exit("no pinned snapshot; pass --snapshot")
        snapshot = snap.serving_path(load_project(location.REPO_ROOT).home.snapshot_dir, pinned)
    mpath = snap.manifest_path(location.SNAPSHOT_MANIFEST_DIR, snapshot.stem)
    if mpath.exists():
        return snapshot, snap.SnapshotManifest.from_file(mpath).as_of
    from sqleval_pipeline.demo.rawgen import AS_OF

    return snapshot, AS_OF


def per_check_costs(path: Path, policy, sf: StatementFilter, sqls: list[str], pinned: list[str],
                    repeat: int) -> dict[str, dict[str, float]]:
    """Median / p95 per query of each check, measured one by one (see module doc)."""
    from sqleval_pipeline.guard.database import fresh_connection, open_guarded_database
    from sqleval_pipeline.guard.duckdb_view import add_plan, decide, parse_view

    try:
        from sqleval_pipeline.guard.characters import scan as char_scan
    except ImportError:  # the character scan is another layer; report it only when present
        char_scan = None
    costs: dict[str, list[float]] = {"characters": [], "sqlglot_filter": [], "duckdb_parse": [],
                                     "duckdb_plan": [], "duckdb_view_total": []}
    root = open_guarded_database(path, policy)
    try:
        for _ in range(repeat):
            for sql, psql in zip(sqls, pinned, strict=True):
                if char_scan is not None:
                    t = time.perf_counter()
                    char_scan(sql)
                    costs["characters"].append((time.perf_counter() - t) * 1000)
                costs["sqlglot_filter"].append(sf.check(f"{sql}\n-- cold {len(costs['sqlglot_filter'])}").elapsed_ms)
                with fresh_connection(root) as con:
                    t = time.perf_counter()
                    statements = con.extract_statements(psql)
                    view = parse_view(con, psql, statements)
                    add_plan(con, psql, view)
                    assert decide(view, policy, policy.tables, allowed_schemas=policy.schemas) is None, psql
                    costs["duckdb_view_total"].append((time.perf_counter() - t) * 1000)
                costs["duckdb_parse"].append(view.parse_ms)
                costs["duckdb_plan"].append(view.plan_ms)
    finally:
        root.close()
    return {k: {"median": statistics.median(v), "p95": pct(v, 0.95)} for k, v in costs.items() if v}


def duckdb_floor(path: Path, pinned: list[str], repeat: int) -> dict:
    """What the cold path cannot go below without dropping a check: on one warm raw connection
    (no filter, no worker, no Python walk, no IPC), each new text's DuckDB parse tree
    (``json_serialize_sql``) and unoptimized bound plan (``json_serialize_plan``) — the two
    views the worker must read before anything runs (guard/duckdb_view.py) — plus its execution,
    against its execution alone. Median over queries of per-query medians, as the ratios above."""
    con = duckdb.connect(str(path), read_only=True)
    per: dict[int, dict[str, list[float]]] = {}
    try:
        for rep in range(repeat):
            for i, psql in enumerate(pinned):
                q = per.setdefault(i, {"exec": [], "views": []})
                text = f"{psql}\n-- floor {rep} {i}"
                t = time.perf_counter()
                con.execute(text).fetchall()
                q["exec"].append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                con.execute("SELECT json_serialize_sql(?::VARCHAR)", [text + " "]).fetchone()
                con.execute("SELECT json_serialize_plan(?::VARCHAR, skip_null := true, skip_empty := true, "
                            "skip_default := true, optimize := false)", [text + " "]).fetchone()
                q["views"].append((time.perf_counter() - t) * 1000)
    finally:
        con.close()
    return {"views_ms": statistics.median(statistics.median(v["views"]) for v in per.values()),
            "exec_ms": statistics.median(statistics.median(v["exec"]) for v in per.values()),
            "ratio": statistics.median((statistics.median(v["exec"]) + statistics.median(v["views"]))
                                       / statistics.median(v["exec"]) for v in per.values())}


def adversarial_times(policy) -> dict:
    """The filter's decision time on the fuzz's adversarial texts (tests/guard/test_parent_bounds.py)."""
    sf = StatementFilter(policy)
    times = []
    for shape, sql in adversarial_texts(seed=21, n=200):
        t = time.perf_counter()
        v = sf.check(sql)
        times.append(((time.perf_counter() - t) * 1000, shape, v.reason))
    worst = max(times)
    return {"texts": len(times), "median_ms": statistics.median(t for t, _, _ in times),
            "worst_ms": worst[0], "worst_shape": worst[1], "worst_reason": worst[2],
            "budget_refusals": sum(1 for _, _, r in times if r == "filter_budget_exceeded")}


def _rss() -> int:
    with open("/proc/self/statm", "rb") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def filter_memory(policy, n: int) -> dict:
    """Memory of the filter after ``n`` distinct allowed 20 KB statements (tests/guard/test_cache_bounds.py)."""
    sf = StatementFilter(policy)
    gc.collect()
    rss0 = _rss()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t = time.perf_counter()
    for i in range(n):
        assert sf.check(big_allowed(i)).allowed
    secs = time.perf_counter() - t
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return {"statements": n, "statement_bytes": len(big_allowed(0)), "traced_mb": traced / 2**20,
            "rss_growth_mb": (_rss() - rss0) / 2**20, "cache_entries": len(sf._cache),
            "cache_mb": sf._cache.nbytes / 2**20, "ms_per_statement": secs * 1000 / n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--snapshot", type=Path)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--before", type=Path, help="a --json output of an earlier run to compare with")
    ap.add_argument("--adversarial", action="store_true", help="time the filter on adversarial texts")
    ap.add_argument("--memory", type=int, default=0, metavar="N",
                    help="filter memory after N distinct 20 KB statements (e.g. 5000)")
    args = ap.parse_args()

    path, as_of = resolve(args.snapshot)
    sqls = [c.reference_sql for c in load_golden(location.GOLDEN_DIR).cases if c.reference_sql]
    pinned = [pin_clock(s, as_of) for s in sqls]
    out: dict = {"snapshot": str(path), "queries": len(sqls), "repeat": args.repeat}

    with GuardedExecutor(path, as_of=as_of) as guard:
        sf = StatementFilter(guard.policy, database_names={path.stem})
        warm = duckdb.connect(str(path), read_only=True)
        for s in pinned:  # warm-up: page cache, both sides
            warm.execute(s).fetchall()
            guard.execute(s)
        warm.close()
        g_ms: list[float] = []
        cold_ms: list[float] = []
        w_ms: list[float] = []
        f_ms: list[float] = []
        fresh_ms: list[float] = []
        per_query: dict[int, dict[str, list[float]]] = {}
        for _ in range(args.repeat):
            # phase 1: raw on a warm connection, interleaved with guarded, query by query
            warm = duckdb.connect(str(path), read_only=True)
            for i, (sql, psql) in enumerate(zip(sqls, pinned, strict=True)):
                pq = per_query.setdefault(i, {"g": [], "w": [], "f": [], "c": []})
                t = time.perf_counter()
                warm.execute(psql).fetchall()
                pq["w"].append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                r = guard.execute(sql)
                pq["g"].append((time.perf_counter() - t) * 1000)
                assert r.ok, r.describe()
                t = time.perf_counter()
                r = guard.execute(f"{sql}\n-- cold {_} {i}")  # a text the guard has never decided
                pq["c"].append((time.perf_counter() - t) * 1000)
                assert r.ok, r.describe()
                f_ms.append(sf.check(f"{sql}\n-- cold filter {_} {i}").elapsed_ms)
            warm.close()  # DuckDB caches one instance per file and process: close before phase 2
            # phase 2: raw with a short-lived read-only connection per query
            for i, psql in enumerate(pinned):
                t = time.perf_counter()
                con = duckdb.connect(str(path), read_only=True)
                con.execute(psql).fetchall()
                con.close()
                per_query[i]["f"].append((time.perf_counter() - t) * 1000)
        for v in per_query.values():
            g_ms += v["g"]
            cold_ms += v["c"]
            w_ms += v["w"]
            fresh_ms += v["f"]
        ratio_warm = statistics.median(statistics.median(v["g"]) / statistics.median(v["w"])
                                       for v in per_query.values())
        ratio_fresh = statistics.median(statistics.median(v["g"]) / statistics.median(v["f"])
                                        for v in per_query.values())
        out["guarded_ms"] = {"median": statistics.median(g_ms), "p95": pct(g_ms, 0.95)}
        out["guarded_cold_ms"] = {"median": statistics.median(cold_ms), "p95": pct(cold_ms, 0.95)}
        out["ratio_guarded_cold_vs_raw_warm_median"] = statistics.median(
            statistics.median(v["c"]) / statistics.median(v["w"]) for v in per_query.values())
        out["raw_warm_connection_ms"] = {"median": statistics.median(w_ms), "p95": pct(w_ms, 0.95)}
        out["raw_fresh_connection_ms"] = {"median": statistics.median(fresh_ms), "p95": pct(fresh_ms, 0.95)}
        out["ratio_guarded_vs_raw_fresh_median"] = ratio_fresh
        out["ratio_guarded_vs_raw_warm_median"] = ratio_warm
        out["ratio_of_medians_fresh"] = statistics.median(g_ms) / statistics.median(fresh_ms)
        out["ratio_of_medians_warm"] = statistics.median(g_ms) / statistics.median(w_ms)
        out["filter_ms"] = {"median": statistics.median(f_ms), "p95": pct(f_ms, 0.95)}
        out["checks_ms"] = per_check_costs(path, guard.policy, sf, sqls, pinned, args.repeat)
        out["cold_floor"] = duckdb_floor(path, pinned, args.repeat)

        # throughput: one client thread per worker, golden queries round-robin
        n_total = len(sqls) * 6
        done = []

        def client(k: int) -> None:
            for j in range(k, n_total, guard.pool.size):
                done.append(guard.execute(sqls[j % len(sqls)]).ok)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(guard.pool.size)]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        secs = time.perf_counter() - t
        out["throughput_qps"] = len(done) / secs
        out["throughput_workers"] = guard.pool.size
        assert all(done)

        bombs = {
            "string_split(repeat('ab,', 3e8)) [timeout 1 s]": ("SELECT string_split(repeat('ab,', 300000000), ',')", 1.0),
            "len(range(3e8))": ("SELECT len(range(300000000))", None),
            "repeat('x', 2e9)": ("SELECT repeat('x', 2000000000)", None),
            "infinite recursive CTE [timeout 1 s]": (
                "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r", 1.0),
            "3-way cross join [timeout 1 s]": (
                "SELECT count(*) FROM fct_order_items a, fct_order_items b, fct_order_items c", 1.0),
        }
        out["bombs"] = {}
        for name, (sql, timeout) in bombs.items():
            t = time.perf_counter()
            r = guard.execute(sql, timeout_s=timeout)
            contained = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            nxt = guard.execute("SELECT count(*) FROM fct_orders")
            recover = (time.perf_counter() - t) * 1000
            out["bombs"][name] = {"contained_ms": contained, "status": r.status, "layer": r.layer,
                                  "reason": r.reason, "next_query_ms": recover, "next_ok": nxt.ok}
        out["workers_replaced"] = guard.pool.replaced
        out["kill_grace_s"] = guard.policy.kill_grace_s

    print(f"snapshot {path.name}: {len(sqls)} golden references x {args.repeat} runs, interleaved")
    print(f"  guarded, repeated   median {out['guarded_ms']['median']:.2f} ms   p95 {out['guarded_ms']['p95']:.2f} ms")
    print(f"  guarded, cold text  median {out['guarded_cold_ms']['median']:.2f} ms   "
          f"p95 {out['guarded_cold_ms']['p95']:.2f} ms   (ratio vs warm raw "
          f"{out['ratio_guarded_cold_vs_raw_warm_median']:.2f})")
    print(f"  raw, fresh conn     median {out['raw_fresh_connection_ms']['median']:.2f} ms   "
          f"p95 {out['raw_fresh_connection_ms']['p95']:.2f} ms")
    print(f"  raw, warm conn      median {out['raw_warm_connection_ms']['median']:.2f} ms   "
          f"p95 {out['raw_warm_connection_ms']['p95']:.2f} ms")
    print(f"  ratio guarded/raw (median over queries of per-query medians): "
          f"{out['ratio_guarded_vs_raw_fresh_median']:.2f} vs fresh connection, "
          f"{out['ratio_guarded_vs_raw_warm_median']:.2f} vs warm connection (target <= 1.5)")
    print(f"  filter (cold)       median {out['filter_ms']['median']:.3f} ms   p95 {out['filter_ms']['p95']:.3f} ms "
          f"(target <= 2 ms)")
    fl = out["cold_floor"]
    print(f"  cold floor (raw DuckDB, warm connection): parse tree + bound plan {fl['views_ms']:.2f} ms "
          f"+ execution {fl['exec_ms']:.2f} ms = {fl['ratio']:.2f}x execution alone, before any filter, "
          "worker or IPC")
    for name, c in out["checks_ms"].items():
        print(f"  check {name:18s} median {c['median']:.3f} ms   p95 {c['p95']:.3f} ms")
    if args.before and args.before.exists():
        before = json.loads(args.before.read_text())
        b = before["guarded_ms"]["median"]
        out["before"] = {"guarded_ms_median": b, "ratio_guarded_vs_raw_warm_median":
                         before.get("ratio_guarded_vs_raw_warm_median")}
        print(f"  before              guarded median {b:.2f} ms -> now {out['guarded_ms']['median']:.2f} ms "
              f"(+{out['guarded_ms']['median'] - b:.2f} ms); ratio vs warm "
              f"{before.get('ratio_guarded_vs_raw_warm_median', float('nan')):.2f} -> "
              f"{out['ratio_guarded_vs_raw_warm_median']:.2f}")
    print(f"  throughput          {out['throughput_qps']:.0f} queries/s with {out['throughput_workers']} workers")
    if args.adversarial:
        a = out["adversarial_filter"] = adversarial_times(guard.policy)
        print(f"  filter, adversarial {a['texts']} texts: median {a['median_ms']:.1f} ms, worst "
              f"{a['worst_ms']:.1f} ms ({a['worst_shape']}, {a['worst_reason']}); "
              f"{a['budget_refusals']} over the budget")
    if args.memory:
        m = out["filter_memory"] = filter_memory(guard.policy, args.memory)
        print(f"  filter memory       after {m['statements']:,} distinct {m['statement_bytes']:,}-byte statements: "
              f"{m['traced_mb']:.1f} MB traced, RSS +{m['rss_growth_mb']:.1f} MB, cache {m['cache_entries']} "
              f"verdicts / {m['cache_mb']:.1f} MB ({m['ms_per_statement']:.2f} ms each)")
    for name, b in out["bombs"].items():
        print(f"  bomb {name:45s} contained in {b['contained_ms']:7.0f} ms by {b['layer']} ({b['reason']}); "
              f"next query {b['next_query_ms']:.0f} ms")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
