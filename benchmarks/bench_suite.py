"""Cost of test-suite accuracy on the demo: neighbour build, distillation, extra executions.

    .venv/bin/python benchmarks/bench_suite.py [--neighbours K] [--rows N] [--scale 50] [--json OUT]

Uses the demo project's pinned snapshot and the data tests of its last ``dbt build`` (run
``make demo`` first). Everything is built into a temporary folder, never into the build
directory. Two sizes:

* **demo**: the golden set as it is;
* **×scale**: every case with a reference replicated ``scale`` times (ids ``<id>-rNN``, the
  SQL followed by a comment naming the replica, so that nothing can be shared between copies
  of a case by its text).

For each size it prints: the neighbour set's build time (and whether the ×scale set is the
demo's, reused: the neighbours depend on what the references look at, not on how many cases
there are), the distillation time, queries run per case to distil it, the suite size per
case (= extra executions for every answer graded correct on the snapshot) and the time of one
:meth:`~sqleval_pipeline.suite.check.Suite.check` of a correct answer (the reference itself;
read-only DuckDB runner, the case's results read from the suite file).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqleval_pipeline.demo import location  # noqa: E402
from sqleval_pipeline.golden import load_golden  # noqa: E402
from sqleval_pipeline.project import load_project  # noqa: E402
from sqleval_pipeline.snapshot import ensure_verified, pinned_snapshot  # noqa: E402
from sqleval_pipeline.suite.audit import run_suite  # noqa: E402
from sqleval_pipeline.suite.check import load_suite, readonly_runner  # noqa: E402
from sqleval_pipeline.suite.constraints import load_dbt_constraints  # noqa: E402
from sqleval_pipeline.suite.neighbours import DEFAULT_NEIGHBOURS, DEFAULT_ROWS_PER_TABLE, SetParams  # noqa: E402


def replicate(cases: list, scale: int) -> list:
    out = []
    for c in cases:
        if not c.reference_sql:
            out.append(c)
            continue
        for k in range(scale):
            out.append(c.model_copy(update={
                "id": f"{c.id}-r{k:02d}", "reference_sql": f"{c.reference_sql} -- replica {k}",
                "alternative_sqls": [f"{s} -- replica {k}" for s in c.alternative_sqls]}))
    return out


def measure(label: str, cases: list, *, serving: Path, manifest, constraints, params: SetParams, root: Path) -> dict:
    t0 = time.perf_counter()
    rep = run_suite(cases, serving=serving, snapshot=manifest, constraints=constraints, root=root, params=params)
    total = time.perf_counter() - t0
    suite = load_suite(rep.path)
    run = readonly_runner()
    by_id = {c.id: c for c in cases}
    sample = list(suite.data.cases)[:: max(1, len(suite.data.cases) // 40)]
    t1 = time.perf_counter()
    for cid in sample:
        assert suite.check(by_id[cid].reference_sql, by_id[cid], run) is None
    check_ms = (time.perf_counter() - t1) * 1000 / max(1, len(sample))
    sizes = [len(c.neighbours) for c in suite.data.cases.values()]
    execs = [c.executions for c in suite.data.cases.values()]
    return {
        "label": label, "cases": len(suite.data.cases), "neighbours": len(rep.nset.manifest.neighbours),
        "rows_per_table": params.rows_per_table, "set_id": rep.nset.set_id, "set_reused": rep.nset.reused,
        "build_s": round(rep.build_seconds, 2), "distill_s": round(rep.distill_seconds, 2), "total_s": round(total, 2),
        "distill_ms_per_case": round(rep.distill_seconds * 1000 / max(1, len(suite.data.cases)), 1),
        "distill_queries_per_case": round(statistics.mean(execs), 1) if execs else 0,
        "suite_size_mean": round(statistics.mean(sizes), 2) if sizes else 0,
        "suite_size_max": max(sizes, default=0), "check_ms_per_correct_answer": round(check_ms, 2),
        "weak": len(rep.weak), "insensitive": len(rep.insensitive),
        "files_mb": round(sum((rep.nset.directory / e.file).stat().st_size for e in rep.nset.manifest.neighbours) / 2**20, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--neighbours", type=int, default=DEFAULT_NEIGHBOURS)
    ap.add_argument("--rows", type=int, default=DEFAULT_ROWS_PER_TABLE)
    ap.add_argument("--scale", type=int, default=50, help="replicas of every case for the large run (0: skip)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    proj = load_project(location.REPO_ROOT)
    sid, manifest, serving = pinned_snapshot(proj.manifest_dir, proj.home.snapshot_dir)
    ensure_verified(serving, manifest)
    constraints = load_dbt_constraints(proj.dbt_target_dir, manifest.sources)
    cases = load_golden(proj.golden_dir).cases
    params = SetParams(neighbours=args.neighbours, rows_per_table=args.rows)
    print(f"snapshot {sid}; {len(cases)} cases; data tests: {constraints.describe()}; "
          f"{args.neighbours} neighbours, {args.rows} rows per table")
    rows = []
    with tempfile.TemporaryDirectory(prefix="sqleval-bench-suite-") as tmp:
        root = Path(tmp)
        rows.append(measure("demo", cases, serving=serving, manifest=manifest, constraints=constraints,
                            params=params, root=root))
        rows.append(measure("demo, again", cases, serving=serving, manifest=manifest, constraints=constraints,
                            params=params, root=root))
        if args.scale:
            big = replicate(cases, args.scale)
            rows.append(measure(f"x{args.scale}", big, serving=serving, manifest=manifest, constraints=constraints,
                                params=params, root=root))
    keys = ["cases", "set_reused", "build_s", "distill_s", "distill_ms_per_case", "distill_queries_per_case",
            "suite_size_mean", "suite_size_max", "check_ms_per_correct_answer", "weak", "insensitive", "files_mb"]
    width = max(len(k) for k in keys)
    print(f"{'':<{width}}  " + "  ".join(f"{r['label']:>14}" for r in rows))
    for k in keys:
        print(f"{k:<{width}}  " + "  ".join(f"{str(r[k]):>14}" for r in rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
