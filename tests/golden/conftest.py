"""Fixtures of the golden-set tests: the demo as a project of its own over the session's
serving snapshot (its golden files in a temporary folder, so the repository is never written
to), and running the real ``sqleval`` command line in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sqleval_pipeline.demo import location
from sqleval_pipeline import project as proj

REPO = location.REPO_ROOT
#: the console script's entry point (sqleval_pipeline.__main__:main), run with this checkout's code
CLI = [sys.executable, "-c", "import sys; from sqleval_pipeline.__main__ import main; sys.exit(main())"]


def write_project(root: Path, spec, **paths_: str) -> Path:
    """``sqleval.yaml`` in ``root`` for ``spec`` (a loaded project's spec) with every path
    absolute and the given ``paths`` replaced."""
    data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["paths"].update(paths_)
    root.mkdir(parents=True, exist_ok=True)
    (root / proj.PROJECT_FILE).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return root


@pytest.fixture
def demo_project(serving_snapshot, tmp_path, monkeypatch) -> Path:
    """The bundled demo as a project in ``tmp_path/project``: its dbt project, glossary, guard
    policy and configurations are the repository's, its pins and build directory the session
    snapshot's, and its golden folder a copy of the committed one."""
    demo = proj.load_project(REPO)
    spec = demo.spec.model_copy(deep=True)
    spec.dbt.project_dir = str(demo.dbt_project_dir)
    spec.validation = str(demo.validation_file)
    root = tmp_path / "project"
    golden = root / "evals" / "golden"
    golden.mkdir(parents=True)
    shutil.copy(location.GOLDEN_DIR / "commerce.jsonl", golden / "commerce.jsonl")
    monkeypatch.delenv("SQLEVAL_HOME", raising=False)
    monkeypatch.delenv("SQLEVAL_PROJECT", raising=False)
    return write_project(
        root, spec, golden=str(golden), configs=str(demo.configs_dir),
        guard_policy=str(demo.guard_policy_path), glossary=str(demo.glossary_path),
        decisions=str(root / "evals" / "decisions.yaml"), labels=str(demo.labels_dir),
        snapshots=str(serving_snapshot.manifest_dir), build=str(serving_snapshot.home.root))


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a ``sqleval`` subprocess: this checkout's code, no colours."""
    env = {k: v for k, v in os.environ.items() if k not in ("SQLEVAL_HOME", "SQLEVAL_PROJECT")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.update(NO_COLOR="1", TERM="dumb", COLUMNS="200", **extra)
    return env


def sqleval(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``sqleval --project PROJECT ARGS…`` as a user would, in a subprocess."""
    return subprocess.run([*CLI, "--project", str(project), *args], cwd=project, env=cli_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)
