"""The dbt CLI resource of the warehouse domain: dbt's version read from the package, the
project's manifest prepared once per process."""

from pathlib import Path

from dagster_dbt import DbtCliResource, DbtProject
from packaging import version

from sqleval_pipeline.project import Project
from sqleval_pipeline.warehouse import dbt


class OfflineDbtCliResource(DbtCliResource):
    """DbtCliResource that reads dbt's version from the package instead of running
    ``dbt --version`` (which looks up the latest release online before every command)."""

    @property
    def _cli_version(self) -> version.Version:  # type: ignore[override]
        from dbt.version import __version__

        return version.parse(__version__)


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


def dbt_resource(project: Project) -> OfflineDbtCliResource:
    p = dbt_project(project)
    return OfflineDbtCliResource(project_dir=p, profiles_dir=str(p.profiles_dir),
                                 profile=p.profile, target=p.target,
                                 dbt_executable=dbt.dbt_executable())
