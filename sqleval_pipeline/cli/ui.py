"""``sqleval ui``: the Dagster UI on the selected project's own instance."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from sqleval_pipeline.cli.common import console, project


def ui(
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port")] = 3000,
) -> None:
    """Open the Dagster UI (`dagster dev`) on the project's instance: the runs the CLI made,
    its assets (asset keys from your dbt project), checks, sensor and nightly schedule."""
    from sqleval_pipeline.orchestrate import ensure_dagster_home
    from sqleval_pipeline.warehouse import dbt

    proj = project()
    dagster_home = ensure_dagster_home(proj.home, proj.spec.orchestration)
    dbt.parse(proj)  # the definitions need the manifest; parse once here, not per step
    exe = Path(sys.executable).parent / "dagster"
    env = {**os.environ, "DAGSTER_HOME": dagster_home, "SQLEVAL_PROJECT": str(proj.file),
           "PATH": f"{exe.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    console.print(f"Dagster UI for project {proj.name} on http://{host}:{port} "
                  f"(instance {dagster_home}); Ctrl-C stops it")
    workspace = Path(dagster_home) / "workspace.yaml"  # names the code location "sqleval"
    workspace.write_text("load_from:\n  - python_module:\n"
                         "      module_name: sqleval_pipeline.definitions\n"
                         "      attribute: defs\n      location_name: sqleval\n")
    os.execvpe(str(exe), [str(exe), "dev", "-w", str(workspace), "-h", host,
                          "-p", str(port)], env)
