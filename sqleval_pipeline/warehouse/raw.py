"""The optional raw-data step a project declares (``raw_data:`` in ``sqleval.yaml``): it fills
the warehouse's source tables before dbt runs. Projects whose sources are dbt seeds, or are
loaded by another tool, declare none."""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path

from sqleval_pipeline.project import Project, ProjectError


def run_raw_step(project: Project, raw_dir: Path, warehouse: Path) -> dict[str, int]:
    """Run the project's raw-data step; return rows per table when the step reports them."""
    step = project.spec.raw_data
    if step is None:
        return {}
    raw_dir.mkdir(parents=True, exist_ok=True)
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    if step.python:
        module, _, func = step.python.partition(":")
        try:
            fn = getattr(importlib.import_module(module), func)
        except (ImportError, AttributeError) as exc:
            raise ProjectError(f"{project.file}: field 'raw_data.python': cannot import "
                               f"{step.python!r}: {exc}") from exc
        counts = fn(raw_dir, warehouse)
        return {str(k): int(v) for k, v in (counts or {}).items()}
    argv = [a.replace("{raw_dir}", str(raw_dir)).replace("{warehouse}", str(warehouse))
            for a in step.command or []]
    proc = subprocess.run(argv, cwd=project.root, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise RuntimeError(f"raw_data command {argv} exited {proc.returncode}:\n{tail}")
    return {}
