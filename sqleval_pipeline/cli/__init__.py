"""The ``sqleval`` command line. Long work materializes the same Dagster assets the UI shows.

Every command works on one sqleval project: ``--project DIR`` (or ``SQLEVAL_PROJECT``), else
the ``sqleval.yaml`` of the current directory, else (in a checkout) the bundled demo."""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Optional

import typer

from sqleval_pipeline.cli import build as build_cmds
from sqleval_pipeline.cli import demo, evaluate, golden, init, report, show, ui
from sqleval_pipeline import project as proj
from sqleval_pipeline.cli.common import fail
from sqleval_pipeline.cli.guardrails import app as guard_app
from sqleval_pipeline.cli.judge import app as judge_app
from sqleval_pipeline.cli.scoring import app as scoring_app
from sqleval_pipeline.processes import tune_gc

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Evaluate a text-to-SQL system on pinned data, with hard guardrails.")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"sqleval {version('sqleval_pipeline')}")
        raise typer.Exit()


@app.callback()
def _options(
    project: Annotated[Optional[Path], typer.Option(
        "--project", "-p", envvar="SQLEVAL_PROJECT",
        help="sqleval project directory (or its sqleval.yaml). Default: ./sqleval.yaml, else "
             "the bundled demo")] = None,
    _version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                           help="Print the installed version and exit")] = False,
) -> None:
    if project is not None:
        target = project / proj.PROJECT_FILE if project.is_dir() else project
        if not target.exists():
            fail(f"--project {project}: no {proj.PROJECT_FILE} there; create one with "
                 f"`sqleval init {project} --dbt-project PATH`")
    proj.select(project)


app.command("init")(init.init)
app.command("build")(build_cmds.build)
app.command("run")(evaluate.run)
app.command("demo")(demo.demo)
app.command("show")(show.show)
app.command("report")(report.report)
app.command("export")(report.export)
app.command("ui")(ui.ui)
app.add_typer(build_cmds.warehouse_app, name="warehouse")
app.add_typer(build_cmds.snapshot_app, name="snapshot")
app.add_typer(golden.golden_app, name="golden")


def _mount_subcommands() -> None:
    app.registered_commands.extend(scoring_app.registered_commands)  # scorecard, diff, gate
    app.add_typer(guard_app, name="guardrails", help="Guarded execution and the hostile suite")
    app.add_typer(judge_app, name="judge", help="Label failed attempts and calibrate the judges")


_mount_subcommands()


def main() -> None:
    tune_gc(freeze=True)  # what the imports made lives as long as the command
    app()


if __name__ == "__main__":
    sys.exit(main())
