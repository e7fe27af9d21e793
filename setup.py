"""Build hook: a wheel carries the demo project as package data.

The demo project lives at the top of the repository (``sqleval.yaml``, ``dbt_project/``,
``evals/``, ``snapshots/``), where a checkout runs it in place. When the package is built, a
copy goes to ``sqleval_pipeline/data/demo/`` inside the wheel, so ``sqleval demo DIR`` can write
it out from an installation that has no checkout. Everything else is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
DEMO_PARTS = ("sqleval.yaml", "dbt_project", "evals", "snapshots")
#: build outputs that may sit in a working copy and never belong in the demo
SKIP = shutil.ignore_patterns("target", "logs", "dbt_packages", ".user.yml", "__pycache__",
                              ".sqleval", "*.pyc", "*.duckdb", "*.wal")


class BuildWithDemo(build_py):
    def run(self):
        super().run()
        dest = Path(self.build_lib) / "sqleval_pipeline" / "data" / "demo"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for part in DEMO_PARTS:
            src = HERE / part
            if not src.exists():
                raise SystemExit(f"cannot build sqleval: the demo project's {part} is missing at {src}")
            if src.is_dir():
                shutil.copytree(src, dest / part, ignore=SKIP)
            else:
                shutil.copy2(src, dest / part)


setup(cmdclass={"build_py": BuildWithDemo})
