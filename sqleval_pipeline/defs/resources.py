"""The resource every domain shares: the sqleval project (where its files are). The dbt CLI
resource lives with the warehouse domain (defs/warehouse/dbt_resource.py), the only one that
runs dbt: an evaluation never imports dagster-dbt."""


from pathlib import Path

import dagster as dg
from pydantic import PrivateAttr

from sqleval_pipeline import paths
from sqleval_pipeline.project import Project, load_project
from sqleval_pipeline.pipeline.evaluation import environment


class SqlevalHome(dg.ConfigurableResource):
    """The sqleval project (``sqleval.yaml``) and its build-output root."""

    project_file: str
    root: str
    manifest_dir: str | None = None
    configs_dir: str | None = None

    _project: Project | None = PrivateAttr(default=None)

    @property
    def project(self) -> Project:
        """The project, loaded once per resource instance (a run's steps share it)."""
        if self._project is None:
            self._project = load_project(Path(self.project_file))
        return self._project

    @property
    def home(self) -> paths.Home:
        return paths.Home(Path(self.root))

    @property
    def pins_dir(self) -> Path:
        return Path(self.manifest_dir) if self.manifest_dir else self.project.manifest_dir

    def environment(self):
        """The evaluation environment (pinned snapshot, golden set, store) of the project."""
        return environment(self.project, home=self.home, manifest_dir=self.pins_dir,
                           configs_dir=Path(self.configs_dir) if self.configs_dir else None)
