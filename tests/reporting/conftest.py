"""One evaluated store for the report tests (slow lane: it needs the session's snapshot).

A copy of the demo project (same snapshot, guard, data and labels; its own golden set and
configurations folder) whose golden set has one question carrying script and markup
payloads. Three configuration versions are evaluated into a temporary build directory: the
offline baseline without and with curation (all cases; the curated one is gated against the
raw one) and a recorded system on three cases, whose answers put the same payloads into SQL,
a column name and result cells, hit the guard once and flip one case. The judges'
calibration is stored as the judge_calibration asset stores it, and a small hostile suite
(the first case of every class) is run through the real guard into
``<build>/reports/guardrails.json``. Tests read the stored files back independently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from sqleval_pipeline.pipeline import comparisons as cmp
from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline.demo import location
from sqleval_pipeline import paths
from sqleval_pipeline import project as proj
from sqleval_pipeline.configs import load_config
from tests.conftest import home_over

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
BREAKOUT = "</script><!--<script>alert(2)</script>"
HOSTILE_QUESTION = f"{SCRIPT} {IMG} {BREAKOUT} "
HOSTILE_SQL = f"SELECT '{SCRIPT}' AS \"{IMG}\", '{BREAKOUT}' AS b, '{IMG}' AS c"


@dataclass(frozen=True)
class Evaluated:
    home: Path
    project: Path
    env: ev.Environment
    keys: dict[str, str]  # raw, curated, recorded -> partition key
    hostile_case: str  # the case whose question and cells carry the payloads
    guard_case: str  # the recorded case one of whose runs the guard refused

    def folder(self, key: str) -> Path:
        batch = self.env.store.latest(key, complete_only=True)
        assert batch is not None
        return self.env.store.batch_dir(key, batch.batch_id)

    def scorecard(self, key: str) -> dict:
        return json.loads((self.folder(key) / "scorecard.json").read_text())


def _golden() -> dict[str, dict]:
    out = {}
    for f in sorted(location.GOLDEN_DIR.glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                c = json.loads(line)
                out[c["id"]] = c
    return out


def _small_suite(env: ev.Environment, home: Path) -> None:
    from sqleval_pipeline.warehouse.foundation import hostile_suite
    from sqleval_pipeline.guard.executor import GuardedExecutor
    from sqleval_pipeline.guard.hostile import run_suite

    suite, _, _ = hostile_suite(env.project, env.manifest)
    firsts = list({c.category: c for c in reversed(suite)}.values())
    with GuardedExecutor(env.serving, as_of=env.as_of, policy=env.policy()) as guard:
        report = run_suite(firsts, guard, timeout_s=2.0)
    out = home / "reports" / "guardrails.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report.to_json(), indent=2, default=str) + "\n")


@pytest.fixture(scope="session")
def evaluated(serving_snapshot, tmp_path_factory) -> Evaluated:
    tmp = tmp_path_factory.mktemp("report")
    home = home_over(serving_snapshot, tmp / "home")
    root = tmp / "project"
    (root / "golden").mkdir(parents=True)
    (root / "configs").mkdir()
    repo = location.REPO_ROOT
    spec = yaml.safe_load((repo / "sqleval.yaml").read_text())
    spec["dbt"]["project_dir"] = str(repo / spec["dbt"]["project_dir"])
    spec["validation"] = str(repo / spec["validation"])
    spec["paths"] = {k: str(repo / v) for k, v in spec["paths"].items()}
    spec["paths"].update(golden=str(root / "golden"), configs=str(root / "configs"))
    (root / "sqleval.yaml").write_text(yaml.safe_dump(spec))
    cases = _golden()
    frozen = sorted(i for i, c in cases.items() if c["band"] == "answerable" and c.get("expected"))
    hostile, guarded, plain = frozen[:3]
    cases[hostile]["question"] = HOSTILE_QUESTION + cases[hostile]["question"]
    (root / "golden" / "cases.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in cases.values()), encoding="utf-8")
    for name in ("baseline_raw.yaml", "baseline_curated.yaml"):
        (root / "configs" / name).write_text((location.EVALS_DIR / "configs" / name).read_text())
    answers = [{"case_id": hostile, "run_index": i, "sql": HOSTILE_SQL} for i in range(3)]
    answers += [{"case_id": guarded, "run_index": 0, "sql": "DELETE FROM fct_orders"}]
    answers += [{"case_id": guarded, "run_index": i, "sql": cases[guarded]["reference_sql"]}
                for i in (1, 2)]
    answers += [{"case_id": plain, "run_index": i, "sql": cases[plain]["reference_sql"]}
                for i in range(3)]
    (root / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    (root / "configs" / "recorded.yaml").write_text(yaml.safe_dump({
        "name": "recorded-report", "generator": {"kind": "recorded", "path": str(root / "answers.jsonl")},
        "runs": 3, "judge": "rules"}))

    # the build dir is `home` (over the session build, whose dbt manifest is there): versioning
    # a configuration reads it instead of parsing the dbt project into the worker's default one
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SQLEVAL_HOME", str(home))
        project = proj.load_project(root)
        env = ev.environment(project, home=paths.Home(home))
        keys = {}
        for label, file, ids in (("raw", "baseline_raw.yaml", None), ("curated", "baseline_curated.yaml", None),
                                 ("recorded", "recorded.yaml", [hostile, guarded, plain])):
            loaded = load_config(root / "configs" / file, project=project)
            cmp.evaluate(env, loaded, case_ids=ids)
            keys[label] = loaded.partition_key
        calibration = ev.calibration_report(env)
        assert calibration is not None, "the demo's labels should calibrate the rules judge"
        ev.calibration_path(env).write_text(calibration.model_dump_json(indent=2))
        _small_suite(env, home)
    proj.select(None)
    return Evaluated(home=home, project=root, env=env, keys=keys, hostile_case=hostile,
                     guard_case=guarded)
