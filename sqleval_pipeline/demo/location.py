"""Where the demo project is: the one module that knows about a checkout of the repository.

In a checkout (``make demo``, the tests) the demo project is the repository itself:
``sqleval.yaml`` at the top with ``dbt_project/``, ``evals/`` and ``snapshots/`` beside it. An
installed wheel carries a copy of those files as package data (``sqleval_pipeline/data/demo``,
copied when the wheel is built) which ``sqleval demo DIR`` writes out into a folder of the
user's; the library never reads or writes a project inside the installed package.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sqleval_pipeline.data import resource

#: the top of the repository when the package runs from a checkout (else: site-packages)
REPO_ROOT = Path(__file__).resolve().parents[2]
DBT_PROJECT_DIR = REPO_ROOT / "dbt_project"
EVALS_DIR = REPO_ROOT / "evals"
GOLDEN_DIR = EVALS_DIR / "golden"
SNAPSHOT_MANIFEST_DIR = REPO_ROOT / "snapshots"
GLOSSARY_PATH = DBT_PROJECT_DIR / "glossary.yml"
#: the demo's sensitive models (dbt_project/models/hr and pii; never served)
DEMO_SENSITIVE: tuple[tuple[str, str], ...] = (("hr", "employees"), ("hr", "salaries"),
                                                ("pii", "customer_contacts"))
#: the files and folders that make up the demo project (what a wheel carries a copy of)
DEMO_PARTS: tuple[str, ...] = ("sqleval.yaml", "dbt_project", "evals", "snapshots")


def checkout_project() -> Path | None:
    """The demo's ``sqleval.yaml`` when this package runs from a checkout, else None."""
    f = REPO_ROOT / "sqleval.yaml"
    return f if f.is_file() and (REPO_ROOT / "sqleval_pipeline" / "__init__.py").is_file() else None


def demo_files() -> Path:
    """The folder holding the demo project's files: the checkout itself, else the copy the
    wheel carries (package data)."""
    if checkout_project() is not None:
        return REPO_ROOT
    return resource("demo")


def write_demo(directory: Path) -> Path:
    """Write the demo project into ``directory`` (created; must not hold a project yet) and
    return its ``sqleval.yaml``. Build outputs of a checkout are not copied."""
    target = directory / "sqleval.yaml"
    if target.exists():
        raise FileExistsError(f"{target} exists: run it with `sqleval --project {directory} demo`, "
                              "or choose an empty folder")
    source = demo_files()
    skip = shutil.ignore_patterns("target", "logs", "dbt_packages", ".user.yml", "__pycache__",
                                  ".sqleval", "*.duckdb", "*.wal")
    directory.mkdir(parents=True, exist_ok=True)
    for part in DEMO_PARTS:
        src = source / part
        if src.is_dir():
            shutil.copytree(src, directory / part, ignore=skip, dirs_exist_ok=True)
        else:
            shutil.copy2(src, directory / part)
    return target
