"""The layout of a project's build directory (``paths.build`` of ``sqleval.yaml``, or
``SQLEVAL_HOME``): everything here can be deleted and rebuilt. Where the build directory is
comes from the :class:`~sqleval_pipeline.project.Project`, never from this package's location."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Home:
    """Build-output locations; everything here can be deleted and rebuilt."""

    root: Path

    @property
    def raw_dir(self) -> Path:
        return self.root / "raw"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse.duckdb"

    @property
    def snapshot_dir(self) -> Path:
        """Built serving snapshot files (``<snapshot_id>.duckdb``)."""
        return self.root / "snapshots"

    @property
    def store(self) -> Path:
        return self.root / "store"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster_home"
