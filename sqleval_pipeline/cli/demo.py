"""``sqleval demo``: a project end to end with no key and no network."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from sqleval_pipeline import project as projects
from sqleval_pipeline.cli.common import console, fail, print_summary, project, run_assets
from sqleval_pipeline.cli.evaluate import batch_of, environment_or_fail, show_evaluation
from sqleval_pipeline.demo.location import write_demo
from sqleval_pipeline.cli.golden import golden_stats
from sqleval_pipeline.configs import load_configs
from sqleval_pipeline.judging.calibration import CalibrationReport
from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline.reporting.calibration import render_calibration
from sqleval_pipeline.reporting.html import write_report

#: where the demo is written when no folder is given and no project is at hand
DEFAULT_DEMO_DIR = Path("sqleval-demo")


def choose_demo_project(directory: Path | None) -> Path:
    """The project ``sqleval demo`` runs: ``directory`` (the demo written into it first when
    it holds no project yet); without one, the selected project, else (an installation with no
    project at hand) the demo written into ``./sqleval-demo``."""
    if directory is None:
        try:
            return projects.locate()
        except projects.ProjectError:
            directory = DEFAULT_DEMO_DIR
    directory = directory.expanduser().resolve()
    existing = directory / projects.PROJECT_FILE
    if existing.exists():
        return existing
    if directory.exists() and any(directory.iterdir()):
        fail(f"{directory} is not empty and holds no {projects.PROJECT_FILE}: choose an empty or "
             "new folder for the demo")
    written = write_demo(directory)
    console.print(f"[green]wrote[/] the demo project to {directory} (its dbt project, golden "
                  "set, configurations and pinned snapshot manifest)")
    return written


def demo(
    directory: Annotated[Optional[Path], typer.Argument(
        help="Folder to write the demo project into and run it from (default: the selected "
             "project; with none, ./sqleval-demo)")] = None,
) -> None:
    """A project end to end with no key and no network (the bundled demo: `make demo`, or
    `sqleval demo DIR` from an installed wheel): build the warehouse and the pinned snapshot,
    verify the golden set, run the guardrails, then evaluate every active configuration
    (baselines first) and gate each against its baseline, then calibrate the judges."""
    projects.select(choose_demo_project(directory))
    # Dagster (~0.7 s to import): loaded by the commands that run assets, not by every command
    from sqleval_pipeline.orchestrate import EVALUATION_GROUPS, FOUNDATION_GROUPS, JUDGING_GROUPS

    proj = project()
    summary = run_assets(FOUNDATION_GROUPS)
    print_summary(summary, f"sqleval demo ({proj.name}): foundation")
    golden_stats(None, False)
    configs = [c for c in load_configs(project=proj) if c.config.active]
    names = {c.name for c in configs}
    configs.sort(key=lambda c: (c.config.baseline in names, c.name))  # baselines first
    for loaded in configs:
        console.rule(f"evaluating {loaded.partition_key}")
        s = run_assets(EVALUATION_GROUPS, partition_key=loaded.partition_key, show_progress=True,
                       reported_checks=frozenset({"eval_gate:regression_gate"}), tags=loaded.run_tags)
        console.print(f"Dagster run {s.run_id[:8]} in {s.seconds:.1f} s")
        ok = show_evaluation(loaded.partition_key, batch_id=batch_of(s),
                             markdown=proj.home.root / "reports" / f"{loaded.name}.md")
        if not ok:
            fail(f"regression gate failed for {loaded.partition_key}")
    console.rule(f"judge calibration against human labels ({proj.labels_dir})")
    run_assets(JUDGING_GROUPS)
    stored = ev.calibration_path(environment_or_fail())
    if stored.exists():  # written by the judge_calibration asset that just ran
        render_calibration(CalibrationReport.model_validate_json(stored.read_text()), console)

    report = write_report(environment_or_fail(), None, proj.home.root / "reports" / "report.html")
    console.print(f"[bold]report:[/] {report} ({report.stat().st_size / 1e6:.1f} MB, one "
                  "self-contained HTML file: open it in a browser, offline)")
    console.print(f"Dagster runs are recorded in {proj.home.dagster_home}: `sqleval ui` (or "
                  "`make ui`) to browse them and follow lineage from a scorecard to the rows.")
