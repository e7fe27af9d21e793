"""Cost of grading on the test suite (docs/test-suite.md#grading-on-the-suite).

    .venv/bin/python benchmarks/bench_suite_grading.py [--scale 50] [--json OUT]

Uses the demo project's build (run ``make demo`` first): its pinned snapshot, its test suite
(built or reused as grading would) and the newest complete batch of each bundled baseline. For
each batch it grades every attempt three ways, writing nothing into the store (verdicts are
cached in a temporary folder):

* **snapshot only**: the rules alone (``test_suite: false``);
* **suite, cold**: the rules and the suite, no cached verdict;
* **suite, warm**: again, every verdict cached (a re-grade, or a comparison re-grading it).

It prints the wall time of each, the answers checked, the guarded executions made on neighbours
and the extra executions per attempt. ``--scale N`` then checks every distinct answer checked
N times more, each copy's SQL followed by a comment of its own (no cache hit, no shared text):
the cost of the checks of a golden set N times as large, on the demo's suite.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqleval_pipeline.configs import load_configs  # noqa: E402
from sqleval_pipeline.grading import GRADER_VERSION  # noqa: E402
from sqleval_pipeline.pipeline import evaluation as ev  # noqa: E402
from sqleval_pipeline.pipeline.grades import grade_batch  # noqa: E402
from sqleval_pipeline.pipeline.suite_checks import Grader, SuiteChecker, current_suite  # noqa: E402
from sqleval_pipeline.project import load_project  # noqa: E402


def newest_batch(env, partition_key: str):
    done = [b for b in env.store.batches(partition_key) if b.status == "complete"]
    return done[-1] if done else None


def grade_with(env, batch, grader: Grader) -> tuple[float, list]:
    """Grade ``batch`` with ``grader``; (seconds, grades)."""
    t0 = time.perf_counter()
    grades = grade_batch(env, batch, grader=grader)
    return time.perf_counter() - t0, grades


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=50)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    project = load_project(ROOT)
    env = ev.environment(project)
    t0 = time.perf_counter()
    handle = current_suite(env)
    suite_s = time.perf_counter() - t0
    suite_grader = Grader(f"{GRADER_VERSION}+suite-{handle.digest}", handle)
    sizes = [len(handle.suite.suite_for(c.id)) for c in env.cases if handle.suite.suite_for(c.id)]
    print(f"suite {handle.digest}: {len(handle.suite.by_id)} neighbours, {len(sizes)} cases with a suite, "
          f"{sum(sizes) / max(1, len(sizes)):.2f} neighbours per case (loaded in {suite_s:.2f} s)")
    out: dict = {"suite": handle.digest, "neighbours_per_case": sum(sizes) / max(1, len(sizes)), "batches": {}}
    for loaded in load_configs(env.configs_dir, project=project, errors=[]):
        if loaded.config.generator.kind != "baseline":
            continue
        batch = newest_batch(env, loaded.partition_key)
        if batch is None:
            print(f"{loaded.partition_key}: no complete batch (run `make demo`)")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp)
            plain_s, _ = grade_with(env, batch, Grader(GRADER_VERSION))
            cold, warm = (Grader(suite_grader.version, handle, cache_dir=cache) for _ in range(2))
            cold_s, graded = grade_with(env, batch, cold)
            warm_s, _ = grade_with(env, batch, warm)
            row = {"attempts": len(graded), "snapshot_only_s": round(plain_s, 3), "suite_cold_s": round(cold_s, 3),
                   "suite_warm_s": round(warm_s, 3), "checked": cold.stats["checked"],
                   "distinct_checks_run": cold.stats["ran"], "neighbour_executions": cold.stats["executions"],
                   "extra_executions_per_attempt": round(cold.stats["executions"] / max(1, len(graded)), 3),
                   "warm_executions": warm.stats["executions"],
                   "accidental": sum(g.suite_check == "accidental_match" for g in graded)}
            # ×scale: every distinct answer checked again `scale` times under SQL of its own
            answers = {(g.case_id, a) for g, a in _answers(env, batch, graded)}
            cases = {c.id: c for c in env.cases}
            checker = SuiteChecker(env, handle, env.policy(loaded.config.guard or None), cache_dir=cache / "scaled")
            t0 = time.perf_counter()
            with checker:
                for k in range(args.scale):
                    for cid, sql in sorted(answers):
                        checker.check(cases[cid], f"{sql} -- replica {k}")
            row.update({f"x{args.scale}_checks": checker.ran, f"x{args.scale}_executions": checker.executions,
                        f"x{args.scale}_s": round(time.perf_counter() - t0, 2)})
        out["batches"][loaded.partition_key] = row
        print(f"{loaded.partition_key}: {json.dumps(row)}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


def _answers(env, batch, grades):
    """(grade, SQL) of the answers the suite checked."""
    from sqleval_pipeline.pipeline.records import Attempt, load_records

    attempts = {a.key: a for a in load_records(env.store.artifact(batch.partition_key, batch.batch_id,
                                                                   "attempts.parquet"), Attempt)}
    return [(g, attempts[g.key].sql) for g in grades if g.suite_check in ("passed", "accidental_match", "inconclusive")]


if __name__ == "__main__":
    raise SystemExit(main())
