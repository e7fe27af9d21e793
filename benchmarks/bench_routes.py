"""Benchmark of the routes that evaluate one configuration version, and of a no-op re-run.

    .venv/bin/python benchmarks/bench_routes.py [--config evals/configs/baseline_raw.yaml] [--repeat 3]

Each route runs as a new process, as a user starts it, on the project's own build directory
(the demo must be built: ``make demo``), and is timed from start to exit:

* ``import dagster`` — the yardstick of the no-op target;
* ``sqleval run -q`` with every input unchanged (the no-op: the batch, scorecard, gate and
  page are reused, nothing is asked of the system under test);
* ``sqleval run -q --new-batch`` — a fresh batch through the CLI;
* ``dagster asset materialize`` of the evaluation assets of the same partition, with the same
  fresh-batch run config — the route the asset graph's Materialize takes (the implicit asset
  job, the definitions' in-process executor), loading the whole code location as the webserver
  does;
* the same, unchanged (the asset route's no-op).

Targets: the asset route within 2x the CLI for a fresh batch; the CLI's no-op within 3x
``import dagster``. Medians over ``--repeat`` runs; every command must succeed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqleval_pipeline.configs import load_config  # noqa: E402
from sqleval_pipeline.project import current  # noqa: E402

BIN = Path(sys.executable).parent


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    secs = time.perf_counter() - t
    # the gate's own verdict (exit 1) is a result, not a failure of the route
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "evals" / "configs" / "baseline_raw.yaml")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    project = current()
    loaded = load_config(args.config.resolve(), project=project)
    key = loaded.partition_key
    env = {**os.environ, "DAGSTER_HOME": str(project.home.dagster_home)}
    sqleval = [str(BIN / "sqleval"), "run", "-c", str(args.config), "-q"]
    fresh_config = json.dumps({"ops": {"eval_attempts": {"config": {"batch": "new"}}}})
    dagster = [str(BIN / "dagster"), "asset", "materialize", "-m", "sqleval_pipeline.definitions",
               "-a", "defs", "--select", "group:evaluation", "--partition", key]
    routes = {
        "import dagster": [sys.executable, "-c", "import dagster"],
        "sqleval run (no-op)": sqleval,
        "sqleval run --new-batch": [*sqleval, "--new-batch"],
        "dagster asset materialize (new batch)": [*dagster, "--config-json", fresh_config],
        "dagster asset materialize (no-op)": dagster,
    }
    timed(sqleval, env)  # the partition exists and has a batch; caches are warm
    out: dict[str, dict] = {}
    for _ in range(args.repeat):
        for name, cmd in routes.items():
            out.setdefault(name, {"seconds": []})["seconds"].append(timed(cmd, env))
    for v in out.values():
        v["median_s"] = statistics.median(v["seconds"])
    base = out["import dagster"]["median_s"]
    cli_new = out["sqleval run --new-batch"]["median_s"]
    print(f"partition {key}, {args.repeat} runs each (median, seconds)")
    for name, v in out.items():
        extra = ""
        if name == "sqleval run (no-op)":
            extra = f"  = {v['median_s'] / base:.1f}x import dagster (target <= 3)"
        elif name == "dagster asset materialize (new batch)":
            extra = f"  = {v['median_s'] / cli_new:.2f}x sqleval run --new-batch (target <= 2)"
        print(f"  {name:40s} {v['median_s']:6.2f}{extra}")
    if args.json:
        args.json.write_text(json.dumps({"partition": key, "routes": out}, indent=2) + "\n")


if __name__ == "__main__":
    main()
