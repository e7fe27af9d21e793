"""``sqleval init``: a new project over an existing dbt project, with a skeleton ``evals/``."""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path
from typing import Annotated, Optional

import typer
import yaml

from sqleval_pipeline.cli.common import console, fail
from sqleval_pipeline.data import resource
from sqleval_pipeline.project import load_project, ProjectError
from sqleval_pipeline.warehouse import dbt

_BASELINE = """\
# The embedded offline baseline: a deterministic question → SQL compiler over your served
# schema{curation_note}. It needs no key and no network, and gives every other
# configuration something to be compared with.
name: baseline
description: Offline lexical baseline over the served schema
generator:
  kind: baseline
context:
  curation: {curation}
runs: 3
judge: rules
"""

_RECORDED = """\
# Answers exported from your own text-to-SQL system, replayed: one JSON line per case and run
# ({"case_id", "run_index", "sql"} or {"case_id", "run_index", "refusal"}). Replace
# evals/answers/example.jsonl with your export and set active: true.
name: recorded-example
description: Replayed answers of the system under test
generator:
  kind: recorded
  path: evals/answers/example.jsonl
context:
  curation: false
runs: 3
judge: rules
baseline: baseline
active: false
"""


def _rel(target: Path, start: Path) -> str:
    try:
        return os.path.relpath(target.resolve(), start.resolve())
    except ValueError:  # another drive
        return str(target.resolve())


def _resolve_selection(target: Path, previous: bytes | None) -> list[str]:
    """Resolve the new project's served selection against its dbt manifest (``dbt parse``):
    lines saying what is served and what is not, and why. An empty selection, or one dbt
    cannot evaluate, restores the previous ``sqleval.yaml`` (or removes the new one) and fails."""
    try:
        selection = dbt.served_selection(load_project(target))
    except (ProjectError, dbt.DbtError) as exc:
        if previous is None:
            target.unlink()
        else:
            target.write_bytes(previous)
        fail(f"{exc}\n(no sqleval.yaml was written: fix --select or --dbt-project and run init again)")
    names = sorted(r.name for r in selection.served)
    shown = ", ".join(names[:20]) + (f", … ({len(names) - 20} more)" if len(names) > 20 else "")
    lines = [f"serves {len(names)} model(s): {shown}"]
    for why in selection.skipped:
        lines.append(f"not served: {why}")
    others = len(selection.unserved) - len(selection.skipped)
    if others > 0:
        lines.append(f"not served: {others} other model(s) outside the selection (unreadable to the "
                     "system under test)")
    return lines


def init(
    directory: Annotated[Path, typer.Argument(help="Directory of the new project (created if needed)")],
    dbt_project: Annotated[Path, typer.Option("--dbt-project", help="Your dbt project (the folder with dbt_project.yml)")],
    select: Annotated[Optional[str], typer.Option(help="dbt selection of the served models, e.g. "
                                                  "'path:models/marts' or 'tag:serving' (default: every model)")] = None,
    as_of: Annotated[Optional[str], typer.Option("--as-of", help="As-of date YYYY-MM-DD: 'today' for "
                                                 "relative questions (default: today; pin it)")] = None,
    name: Annotated[Optional[str], typer.Option(help="Project name (default: the dbt project's)")] = None,
    profiles_dir: Annotated[Optional[Path], typer.Option(help="Folder of your profiles.yml "
                                                         "(default: the dbt project, else ~/.dbt)")] = None,
    sensitive_schemas: Annotated[Optional[str], typer.Option(help="Comma-separated schemas that "
                                                             "must never be served")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing sqleval.yaml")] = False,
) -> None:
    """Write sqleval.yaml and a skeleton evals/ (an offline baseline configuration, an example
    recorded configuration with an example answers file, an empty golden folder)."""
    dbt_dir = dbt_project.expanduser()
    yml = dbt_dir / "dbt_project.yml"
    if not yml.exists():
        fail(f"--dbt-project {dbt_dir}: no dbt_project.yml there; point it at your dbt project")
    try:
        dbt_doc = yaml.safe_load(yml.read_text()) or {}
    except yaml.YAMLError as exc:
        fail(f"{yml}: not valid YAML: {exc}")
    try:
        day = dt.date.fromisoformat(as_of) if as_of else dt.date.today()
    except ValueError:
        fail(f"--as-of {as_of!r} is not a date (YYYY-MM-DD)")
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "sqleval.yaml"
    if target.exists() and not force:
        fail(f"{target} exists; pass --force to overwrite it")
    project_name = name or re.sub(r"[^A-Za-z0-9_.-]", "_", str(dbt_doc.get("name") or directory.name))
    semantic = any("semantic_models:" in f.read_text(errors="ignore")
                   for f in dbt_dir.rglob("*.yml") if "target" not in f.parts)
    dbt_block = {"project_dir": _rel(dbt_dir, directory), "warehouse": "build"}
    if profiles_dir:
        dbt_block["profiles_dir"] = _rel(profiles_dir, directory)
    spec = {
        "version": 1, "name": project_name,
        "dbt": dbt_block,
        "serve": {"select": select, "schema": "main"} if select else {"schema": "main"},
        "as_of": day.isoformat(),
        "sensitive_schemas": [s.strip() for s in (sensitive_schemas or "").split(",") if s.strip()],
        "validation": "dbt_tests",
        "paths": {"golden": "evals/golden", "configs": "evals/configs",
                  "guard_policy": "evals/guard_policy.yaml", "decisions": "evals/decisions.yaml",
                  "labels": "evals/labels", "snapshots": "snapshots", "build": ".sqleval"},
    }
    header = ("# sqleval project (docs/project.md). Paths are relative to this file.\n"
              f"# as_of is 'today' for every relative question (last month, this year): "
              f"{'given' if as_of else 'set to the day of `sqleval init`'}; pin it to your data.\n")
    previous = target.read_bytes() if target.exists() else None
    target.write_text(header + yaml.safe_dump(spec, sort_keys=False))
    served = _resolve_selection(target, previous)
    evals = directory / "evals"
    for sub in ("golden", "configs", "labels", "answers", "prompts"):
        (evals / sub).mkdir(parents=True, exist_ok=True)
    # the bundled prompt template, for model-backed configurations (its text is versioned)
    bundled = resource("prompts", "text_to_sql_v1.j2")
    if not (evals / "prompts" / bundled.name).exists():
        (evals / "prompts" / bundled.name).write_text(bundled.read_text())
    (evals / "golden" / ".gitkeep").touch()
    (evals / "labels" / ".gitkeep").touch()
    (evals / "configs" / "baseline.yaml").write_text(_BASELINE.format(
        curation="true" if semantic else "false",
        curation_note=" and the definitions of your dbt semantic layer" if semantic else ""))
    (evals / "configs" / "recorded_example.yaml").write_text(_RECORDED)
    (evals / "answers" / "example.jsonl").write_text("".join(
        f'{{"case_id": "q-001", "run_index": {r}, "sql": "SELECT count(*) FROM my_table"}}\n'
        f'{{"case_id": "q-002", "run_index": {r}, "refusal": "salaries are not available"}}\n'
        for r in range(3)))
    (evals / "decisions.yaml").write_text(
        "# Recorded decisions that allow an accuracy drop between two configuration versions\n"
        "# (who, why, when, which versions). The regression gate fails without one.\n[]\n")
    here = _rel(directory, Path.cwd())
    console.print(f"[green]created[/] {target} (dbt project {dbt_dir}, as of {day}"
                  f"{', selection: ' + select if select else ', every model served'})")
    for line in served:
        console.print(line, highlight=False, markup=False)
    console.print("next:")
    console.print(f"  sqleval --project {here} build                         # dbt build, snapshot, guardrails")
    console.print(f"  sqleval --project {here} golden import QUESTIONS.csv   # your questions, frozen")
    console.print(f"  sqleval --project {here} run -c {here}/evals/configs/baseline.yaml")
