"""The dbt CLI resource of the warehouse domain: dagster-dbt's own ``DbtCliResource`` on an
executable that answers ``dbt --version`` offline (:func:`~sqleval_pipeline.warehouse.dbt.offline_dbt_executable`),
and the project's manifest prepared once per process."""

from pathlib import Path

from dagster_dbt import DbtCliResource, DbtProject

from sqleval_pipeline.project import Project
from sqleval_pipeline.warehouse import dbt


_prepared: dict[tuple[Path, Path], DbtProject] = {}


def dbt_project(project: Project) -> DbtProject:
    """The project's DbtProject with its manifest prepared once per process: ``dbt parse``
    into the build dir only when a file of the dbt project is newer than the manifest (so
    model edits show, and a run's process does not re-parse an unchanged project)."""
    key = (project.file, project.dbt_target_dir)
    if key not in _prepared:
        dbt.parse(project)
        _prepared[key] = DbtProject(
            project_dir=project.dbt_project_dir, target_path=project.dbt_target_dir,
            profiles_dir=dbt.profiles_dir(project),
            profile=project.dbt_profile_name if project.spec.dbt.warehouse == "build"
            else project.spec.dbt.profile,
            target="sqleval" if project.spec.dbt.warehouse == "build" else project.spec.dbt.target,
        )
    return _prepared[key]


def dbt_resource(project: Project) -> DbtCliResource:
    p = dbt_project(project)
    return DbtCliResource(project_dir=p, profiles_dir=str(p.profiles_dir), profile=p.profile, target=p.target,
                          dbt_executable=str(dbt.offline_dbt_executable(project.home.root / "bin")))
