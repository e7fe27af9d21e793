"""The dbt manifest is re-parsed only when a file of the dbt project is newer than it; a project
with a selection is parsed by the `dbt ls` that resolves it."""

import json
import os
import subprocess
from types import SimpleNamespace

import pytest

from sqleval_pipeline.project import ProjectError
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
                              dbt_project_dir=project_dir,
                              spec=SimpleNamespace(serve=SimpleNamespace(select=None, exclude=None)))
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


# --------------------------------------------------------------------------- parsed by the listing

MODELS = {"a": "main", "b": "main", "secret": "restricted", "c": "main"}
#: what the fake `dbt ls` selects for a `--select` value (dbt's selection, stood in for)
SELECTS = {"tag:mine": ["a", "secret"], "tag:other": ["b", "c"]}


class FakeDbt:
    """Stands in for the dbt executable: `parse` and `ls` write a manifest (and the partial-parse
    state) into their target path, as dbt does; `ls` prints the unique ids it selects as JSON
    lines; an unknown selector fails as dbt fails."""

    def __init__(self, ls_writes_manifest: bool = True):
        self.calls: list[tuple[str, object]] = []
        self.ls_writes_manifest = ls_writes_manifest

    def __call__(self, project, command, *, target_path=None, check=True):
        target = target_path or project.dbt_target_dir
        self.calls.append((command[0], target))
        sel = command[command.index("--select") + 1] if "--select" in command else None
        if command[0] == "ls" and sel not in SELECTS:
            return subprocess.CompletedProcess(command, 2, "", f"Runtime Error: no selector {sel!r}")
        target.mkdir(parents=True, exist_ok=True)
        if command[0] == "ls" and not self.ls_writes_manifest:
            return subprocess.CompletedProcess(command, 0, "", "")
        nodes = {f"model.p.{m}": {"resource_type": "model", "name": m, "schema": schema, "database": "w",
                                  "config": {"materialized": "table"}} for m, schema in MODELS.items()}
        (target / "manifest.json").write_text(json.dumps({"nodes": nodes}))
        (target / dbt.PARTIAL_PARSE_FILE).write_bytes(b"state")
        out = "".join(json.dumps({"unique_id": f"model.p.{m}"}) + "\n" for m in SELECTS.get(sel, []))
        return subprocess.CompletedProcess(command, 0, out if command[0] == "ls" else "", "")


def _project(tmp_path, select):
    (tmp_path / "dbt" / "models").mkdir(parents=True, exist_ok=True)
    (tmp_path / "dbt" / "models" / "a.sql").write_text("select 1")
    return SimpleNamespace(dbt_project_yml=tmp_path / "dbt" / "dbt_project.yml", dbt_project_dir=tmp_path / "dbt",
                           dbt_target_dir=tmp_path / "build" / "dbt_target", file=tmp_path / "sqleval.yaml",
                           spec=SimpleNamespace(serve=SimpleNamespace(select=select, exclude=None),
                                                sensitive_schemas=["restricted"]))


def test_a_selection_is_resolved_by_the_listing_that_parses_the_project(tmp_path, monkeypatch):
    fake = FakeDbt()
    monkeypatch.setattr(dbt, "run_dbt", fake)
    project = _project(tmp_path, "tag:mine")
    selection = dbt.served_selection(project)
    assert fake.calls == [("ls", project.dbt_target_dir)]  # one dbt process: no `dbt parse` before it
    assert [r.name for r in selection.served] == ["a"]  # `secret` is in a sensitive schema
    assert {r.name for r in selection.unserved} == {"b", "c", "secret"}
    # another selection over the same manifest lists again, in a target of its own (the
    # manifest the definitions read is not rewritten)
    project.spec.serve.select = "tag:other"
    assert [r.name for r in dbt.served_selection(project).served] == ["b", "c"]
    assert fake.calls[1:] == [("ls", project.dbt_target_dir / "ls")]
    # an edit re-parses by listing, and the ids kept are those of that listing only
    earlier = (project.dbt_project_dir / "models" / "a.sql").stat().st_mtime - 10
    os.utime(project.dbt_target_dir / "manifest.json", (earlier, earlier))  # a model edited since
    dbt.parse(project)
    assert fake.calls[2:] == [("ls", project.dbt_target_dir)]
    assert len(list(project.dbt_target_dir.glob("sqleval-listed-*.json"))) == 1
    project.spec.serve.select = "tag:mine"
    assert [r.name for r in dbt.served_selection(project).served] == ["a"]
    assert fake.calls[3:] == [("ls", project.dbt_target_dir / "ls")]


def test_a_selection_dbt_cannot_evaluate_still_parses_and_names_the_field(tmp_path, monkeypatch):
    fake = FakeDbt()
    monkeypatch.setattr(dbt, "run_dbt", fake)
    project = _project(tmp_path, "tag:no_such_thing")
    with pytest.raises(ProjectError, match=r"field 'serve.select': dbt cannot evaluate the selection "
                                           r"'tag:no_such_thing': Runtime Error"):
        dbt.served_selection(project)
    # the listing failed, so `dbt parse` wrote the manifest; the error comes from the listing
    assert [c[0] for c in fake.calls] == ["ls", "parse", "ls"]
    assert (project.dbt_target_dir / "manifest.json").is_file()
    assert not list(project.dbt_target_dir.glob("sqleval-listed-*.json"))


def test_a_listing_that_leaves_no_manifest_is_followed_by_a_parse(tmp_path, monkeypatch):
    # (dbt told not to write JSON, say): the definitions still get their manifest
    fake = FakeDbt(ls_writes_manifest=False)
    monkeypatch.setattr(dbt, "run_dbt", fake)
    project = _project(tmp_path, "tag:mine")
    assert dbt.parse(project).is_file()
    assert [c[0] for c in fake.calls] == ["ls", "parse"]
