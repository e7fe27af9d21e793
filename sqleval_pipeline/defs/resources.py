"""Resources shared by the assets: where sqleval keeps its files, and the dbt CLI."""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path

import dagster as dg
from dagster_dbt import DbtCliResource, DbtProject
from packaging import version

from sqleval_pipeline import paths


class SqlevalHome(dg.ConfigurableResource):
    """Build-output root (``SQLEVAL_HOME``) and the committed manifest / golden folders."""

    root: str
    manifest_dir: str = str(paths.SNAPSHOT_MANIFEST_DIR)
    golden_dir: str = str(paths.GOLDEN_DIR)
    configs_dir: str = str(paths.EVALS_DIR / "configs")
    decisions_path: str = str(paths.EVALS_DIR / "decisions.yaml")

    @property
    def home(self) -> paths.Home:
        return paths.Home(Path(self.root))

    def environment(self):
        """The evaluation environment (pinned snapshot, golden set, store) for these folders."""
        from sqleval_pipeline.evaluation import environment

        return environment(self.home, manifest_dir=Path(self.manifest_dir),
                           golden_dir=Path(self.golden_dir), configs_dir=Path(self.configs_dir),
                           decisions=Path(self.decisions_path))


class OfflineDbtCliResource(DbtCliResource):
    """DbtCliResource that reads dbt's version from the package instead of running
    ``dbt --version`` (which looks up the latest release online before every command)."""

    @property
    def _cli_version(self) -> version.Version:  # type: ignore[override]
        from dbt.version import __version__

        return version.parse(__version__)


def dbt_executable() -> str:
    exe = Path(sys.executable).parent / "dbt"
    return str(exe) if exe.exists() else "dbt"


def prepare_manifest(project: DbtProject, *, force: bool = False) -> Path:
    """Run ``dbt parse`` (with the venv's dbt) when the manifest is missing, or always when
    ``force`` (under ``dagster dev``, so model edits show up on reload)."""
    if force or not project.manifest_path.exists():
        proc = subprocess.run(
            [dbt_executable(), "parse", "--quiet", "--project-dir", str(project.project_dir),
             "--profiles-dir", str(project.profiles_dir)],
            cwd=project.project_dir, capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0 or not project.manifest_path.exists():
            raise RuntimeError(
                f"`dbt parse` failed in {project.project_dir}:\n{proc.stdout}\n{proc.stderr}"
            )
    return project.manifest_path


@cache
def dbt_project() -> DbtProject:
    from dagster_dbt.dbt_project import using_dagster_dev

    project = DbtProject(project_dir=paths.DBT_PROJECT_DIR, profiles_dir=paths.DBT_PROJECT_DIR)
    # not project.prepare_if_dev(): its preparer looks for `dbt` on PATH, which is not there
    # when the venv is not activated (as under `make ui`)
    prepare_manifest(project, force=using_dagster_dev())
    return project


def dbt_resource() -> OfflineDbtCliResource:
    project = dbt_project()
    return OfflineDbtCliResource(
        project_dir=project, profiles_dir=str(paths.DBT_PROJECT_DIR),
        dbt_executable=dbt_executable(),
    )
