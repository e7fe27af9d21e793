"""The dbt manifest is re-parsed only when a file of the dbt project is newer than it."""

import os
from types import SimpleNamespace

from sqleval_pipeline.warehouse import dbt


def test_parse_runs_only_when_a_source_is_newer(tmp_path, monkeypatch):
    project_dir = tmp_path / "dbt"
    (project_dir / "models").mkdir(parents=True)
    (project_dir / "target").mkdir()
    model = project_dir / "models" / "a.sql"
    model.write_text("select 1")
    manifest = tmp_path / "build" / "manifest.json"
    calls = []

    def fake_run(project, args):
        calls.append(args)
        manifest.parent.mkdir(exist_ok=True)
        manifest.write_text("{}")

    monkeypatch.setattr(dbt, "run_dbt", fake_run)
    monkeypatch.setattr(dbt, "manifest_path", lambda p: manifest)
    project = SimpleNamespace(dbt_project_yml=project_dir / "dbt_project.yml",
                              dbt_project_dir=project_dir)
    dbt.parse(project)
    assert len(calls) == 1  # no manifest yet
    dbt.parse(project)
    assert len(calls) == 1  # unchanged project: no re-parse
    # build output inside the project (target/) is not a source
    (project_dir / "target" / "run_results.json").write_text("{}")
    later = manifest.stat().st_mtime + 10
    os.utime(project_dir / "target" / "run_results.json", (later, later))
    dbt.parse(project)
    assert len(calls) == 1
    os.utime(model, (later, later))  # a model edited after the parse
    dbt.parse(project)
    assert len(calls) == 2
    dbt.parse(project, force=True)
    assert len(calls) == 3
