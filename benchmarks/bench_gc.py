"""What sqleval's garbage-collector settings (``processes.tune_gc``) save, measured.

    .venv/bin/python benchmarks/bench_gc.py [--repeat 3]

Each measurement runs in a fresh interpreter, once with Python's collector settings and once
with sqleval's (the thresholds set before the imports, what the imports made frozen after
them, as the ``sqleval`` command does), and reports the best CPU time (user + system) of
``--repeat`` runs:

* **import the command line** (``sqleval_pipeline.cli``);
* **build the Dagster definitions** of the demo project (what a code server or a run worker
  does when it loads the code location);
* **one evaluation** of the demo's offline baseline (``baseline_raw``: attempts → executions →
  grades → diagnoses → scorecard → comparisons, guard workers included), on the pinned
  snapshot and the data tests of the last ``dbt build``, into a temporary build directory
  (run ``make demo`` first; nothing is written to the project's build directory);
* **the ``sqleval run`` command** of that configuration, in process, through Dagster (its own
  instance in a temporary build directory over the demo's snapshot).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = """
import gc, resource, sys
sys.path.insert(0, {root!r})
if {tuned!r}:
    from sqleval_pipeline.processes import tune_gc
    tune_gc()
"""
FREEZE = """
if {tuned!r}:
    tune_gc(freeze=True)
"""
REPORT = """
r, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime)
"""
WORK = {
    "import the command line": ("import sqleval_pipeline.cli", ""),
    "build the definitions": ("import sqleval_pipeline.definitions as d",
                              "d.build_definitions()"),
    "one evaluation (baseline_raw)": ("""
import shutil, tempfile
from pathlib import Path
from sqleval_pipeline import paths
from sqleval_pipeline.configs import load_config
from sqleval_pipeline.demo import location
from sqleval_pipeline.pipeline import comparisons as cmp
from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline.project import load_project
""", """
proj = load_project(location.REPO_ROOT)
tmp = Path(tempfile.mkdtemp(prefix="sqleval-bench-gc-"))
home = paths.Home(tmp / "home")
home.root.mkdir()
(home.root / "snapshots").symlink_to(proj.home.snapshot_dir)
(home.root / "dbt_target").symlink_to(proj.dbt_target_dir)
env = ev.environment(proj, home=home, manifest_dir=proj.manifest_dir, dbt_target=home.root / "dbt_target")
cmp.evaluate(env, load_config(location.EVALS_DIR / "configs" / "baseline_raw.yaml"))
shutil.rmtree(tmp)
"""),
    "`sqleval run` (baseline_raw, through Dagster)": ("""
import os, shutil, tempfile
from pathlib import Path
import sqleval_pipeline.cli as cli
from sqleval_pipeline.demo import location
from sqleval_pipeline.project import load_project
if not {tuned!r}:
    cli.tune_gc = lambda **kwargs: None  # the command's own call: Python's settings throughout
""", """
proj = load_project(location.REPO_ROOT)
tmp = Path(tempfile.mkdtemp(prefix="sqleval-bench-gc-"))
(tmp / "snapshots").symlink_to(proj.home.snapshot_dir)
(tmp / "dbt_target").symlink_to(proj.dbt_target_dir)
os.environ["SQLEVAL_HOME"] = str(tmp)
sys.argv = ["sqleval", "run", "-c", str(location.EVALS_DIR / "configs" / "baseline_raw.yaml"), "--quiet"]
try:
    cli.main()
except SystemExit as exc:
    assert exc.code in (0, None, 1), exc.code
shutil.rmtree(tmp)
"""),
}


def measure(imports: str, work: str, tuned: bool) -> float:
    code = "\n".join([PRELUDE.format(root=str(ROOT), tuned=tuned), imports.replace("{tuned!r}", repr(tuned)),
                      FREEZE.format(tuned=tuned), "def main():\n" + "".join(f"    {ln}\n" for ln in
                      (work or "pass").strip().splitlines()),
                      "if __name__ == '__main__':\n    main()\n" + REPORT.replace("\n", "\n    ")])
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    try:
        out = subprocess.run([sys.executable, f.name], capture_output=True, text=True, check=True, cwd=ROOT)
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"{exc.stderr[-2000:]}") from exc
    finally:
        Path(f.name).unlink()
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    rows = []
    for label, (imports, work) in WORK.items():
        python = min(measure(imports, work, False) for _ in range(args.repeat))
        sqleval = min(measure(imports, work, True) for _ in range(args.repeat))
        rows.append({"work": label, "python_defaults_s": round(python, 2), "sqleval_s": round(sqleval, 2),
                     "saved": f"{(1 - sqleval / python) * 100:.0f} %"})
    width = max(len(r["work"]) for r in rows)
    print(f"{'CPU seconds (best of ' + str(args.repeat) + ')':<{width}}  Python's GC  sqleval's GC  saved")
    for r in rows:
        print(f"{r['work']:<{width}}  {r['python_defaults_s']:>11}  {r['sqleval_s']:>12}  {r['saved']:>5}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
