"""Where things live. Build outputs go under ``SQLEVAL_HOME`` (default ``<repo>/.sqleval``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DBT_PROJECT_DIR = REPO_ROOT / "dbt_project"
EVALS_DIR = REPO_ROOT / "evals"
GOLDEN_DIR = EVALS_DIR / "golden"
SNAPSHOT_MANIFEST_DIR = REPO_ROOT / "snapshots"
GLOSSARY_PATH = DBT_PROJECT_DIR / "glossary.yml"


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


def home() -> Home:
    root = Path(os.environ.get("SQLEVAL_HOME", REPO_ROOT / ".sqleval")).resolve()
    return Home(root)
