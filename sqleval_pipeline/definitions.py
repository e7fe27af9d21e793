"""Dagster definitions: thin, loaded by ``workspace.yaml``.

Each folder of :mod:`sqleval_pipeline.defs` is a domain that loads itself: every asset,
asset check, job, schedule and sensor at module level in its files is picked up; a domain
whose definitions depend on the project (the dbt models, the snapshot over the served models)
exports ``definitions(ctx)`` instead. Adding an asset is one file in its domain.

They are built from the selected sqleval project (``SQLEVAL_PROJECT``, else ``sqleval.yaml``
in the working directory, else the bundled demo): asset keys come from *its* dbt project."""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from collections.abc import Iterable
from types import ModuleType

import dagster as dg

import sqleval_pipeline.defs as defs_package
from sqleval_pipeline.defs.context import DefsContext
from sqleval_pipeline.defs.resources import SqlevalHome
from sqleval_pipeline.project import Project
from sqleval_pipeline.project import current as current_project
from sqleval_pipeline.processes import tune_gc


def domains(package: ModuleType = defs_package, only: Iterable[str] | None = None) -> list[ModuleType]:
    """The domain packages (sub-folders) of ``package``, by name (``only``: these names)."""
    wanted = None if only is None else set(only)
    return [importlib.import_module(f"{package.__name__}.{m.name}")
            for m in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name)
            if m.ispkg and (wanted is None or m.name in wanted)]


def domain_definitions(domain: ModuleType, ctx: DefsContext) -> dg.Definitions:
    """A domain's definitions: its ``definitions(ctx)`` when it has one, plus whatever its
    modules define at module level."""
    with warnings.catch_warnings():  # a preview API in Dagster 1.13 (pinned in the lock)
        warnings.simplefilter("ignore", dg.PreviewWarning)
        found = dg.load_definitions_from_package_module(domain)
    build = getattr(domain, "definitions", None)
    return dg.Definitions.merge(found, build(ctx)) if callable(build) else found


def build_definitions(project: Project | None = None, manifest_dir: str | None = None,
                      configs_dir: str | None = None,
                      package: ModuleType = defs_package,
                      only: Iterable[str] | None = None) -> dg.Definitions:
    """All definitions of a project; the arguments override where pins and configurations
    are (tests use temporary folders) and which package holds the domains. ``only`` builds
    just the named domains (the CLI runs one job: an evaluation needs neither the dbt
    models nor dagster-dbt; the code location always loads every domain)."""
    project = project or current_project()
    ctx = DefsContext(project, manifest_dir, configs_dir)
    sqleval = SqlevalHome(project_file=str(project.file), root=str(project.home.root),
                          manifest_dir=manifest_dir, configs_dir=configs_dir)
    return dg.Definitions.merge(
        *(domain_definitions(d, ctx) for d in domains(package, only)),
        # every route runs in process: the UI's Materialize, `dagster asset materialize` and
        # backfills use the implicit asset job, whose default executor would otherwise be the
        # multiprocess one (each step re-importing the code location: ~30x slower)
        dg.Definitions(resources={"sqleval": sqleval}, executor=dg.in_process_executor),
    )


@dg.definitions
def defs() -> dg.Definitions:
    """What ``workspace.yaml`` names: Dagster calls it when it loads the code location, so
    importing this module builds nothing (the CLI builds only the domains its job needs).
    The process that loads it (a code server, a run worker) gets sqleval's garbage collector
    settings, its definitions frozen out of the collector's walks (:func:`tune_gc`)."""
    tune_gc()
    built = build_definitions()
    tune_gc(freeze=True)
    return built
