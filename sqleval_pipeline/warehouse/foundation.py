"""The foundation of a project's evaluation as plain functions: the served selection, the
validation suites, the frozen snapshot and what must stay unreadable. The Dagster assets
(``defs/warehouse``, ``defs/snapshot``) and the CLI call these, so there is one pipeline."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.project import Project
from sqleval_pipeline.warehouse import dbt
from sqleval_pipeline.warehouse.validation import SuitesError, load_suites, suites_from_dbt_tests, validate_tables
from sqleval_pipeline.guard import hostile


def validator(project: Project, selection: dbt.ServedSelection) -> tuple[Callable[[Path, str], Any] | None, list[str]]:
    """The project's validation step over a built serving file, and notes on what it skips."""
    mode = project.spec.validation
    if mode == "none":
        return None, ["validation: none (declared in the project file)"]
    if mode == "dbt_tests":
        manifest = dbt.load_manifest(project)
        run_results_file = project.dbt_target_dir / "run_results.json"
        run_results = None
        if run_results_file.exists():
            rr = json.loads(run_results_file.read_text())
            if (rr.get("args") or {}).get("which") == "build":
                run_results = rr
        served = {r.unique_id: r.name for r in selection.served}
        suites, skipped = suites_from_dbt_tests(manifest, served, run_results)
        if not suites:
            return None, ["validation: no dbt tests on the served models to check again", *skipped]
    else:
        suites, skipped = load_suites(project.validation_file), []  # type: ignore[arg-type]
        unknown = sorted({s.table for s in suites} - {r.name for r in selection.served})
        if unknown:
            raise SuitesError(f"{project.validation_file}: suites for {unknown}, which the "
                              f"project does not serve (served: "
                              f"{sorted(r.name for r in selection.served)})")
    return (lambda path, schema: validate_tables(path, suites, schema)), skipped


def freeze(project: Project, selection: dbt.ServedSelection | None = None) -> snap.SnapshotManifest:
    """Validate and freeze the served models of the built warehouse into a serving file."""
    selection = selection or dbt.served_selection(project)
    check, notes = validator(project, selection)
    return snap.freeze_snapshot(
        dbt.warehouse_path(project), project.home.snapshot_dir, project.manifest_dir,
        project.as_of, relations=selection.served, serving_schema=project.spec.serve.schema_name,
        dbt_manifest=dbt.manifest_path(project), validator=check,
        selection=project.spec.serve.select or "(every model)",
        skipped=[*selection.skipped, *notes],
        sensitive_schemas=project.spec.sensitive_schemas,
    )


def sensitive_names(project: Project, selection: dbt.ServedSelection | None = None) -> list[tuple[str, str]]:
    """(schema, name) of every relation that must never be readable, most sensitive first:
    the models of the declared sensitive schemas, every other model that is not served, then
    every seed and source — none of them is in the serving file."""
    selection = selection or dbt.served_selection(project)
    declared = set(project.spec.sensitive_schemas)
    models = dbt.sensitive_relations(selection)
    manifest = dbt.load_manifest(project)
    raw = sorted({(n.get("schema") or "main", n.get("identifier") or n.get("alias") or n["name"])
                  for n in [*manifest.get("sources", {}).values(),
                            *(v for v in manifest.get("nodes", {}).values()
                              if v.get("resource_type") == "seed")]})
    ordered = ([r for r in models if r[0].lower() in declared]
               + [r for r in models if r[0].lower() not in declared] + raw)
    return list(dict.fromkeys(ordered))


def hostile_suite(project: Project, manifest: snap.SnapshotManifest,
                  files: list[Path] | None = None) -> tuple[list, list[tuple[str, str]], list[str]]:
    """The hostile cases of a project: the bundled templates (or the project's own files, or
    ``files``) instantiated over its served tables and its sensitive relations. Returns
    (cases, templates not instantiated with the reason, instantiation notes — e.g. an
    ``{absent:STEM}`` name drawn as ``STEM_1`` because the project serves ``STEM``)."""
    result = hostile.project_suite(manifest, sensitive_names(project),
                                   files=files or project.hostile_files)
    return list(result.cases), list(result.skipped), list(result.notes)
