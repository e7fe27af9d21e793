"""``sqleval run``: one configuration evaluated, its scorecard and gate shown."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from sqleval_pipeline.cli.common import console, err, fail, print_summary, project, run_assets

#: generators that answer without calling a model provider (their calls are not counted)
OFFLINE_GENERATORS = frozenset({"baseline", "recorded"})


def environment_or_fail():
    from sqleval_pipeline import evaluation as ev

    try:
        return ev.environment(project())
    except (ev.EvaluationError, ValueError) as exc:
        fail(str(exc))


def show_evaluation(partition_key: str, *, markdown: Path | None = None) -> bool:
    """Print the newest scorecard, diff and gate of a configuration version; True if the gate
    passed or had nothing to compare with."""
    from sqleval_pipeline import evaluation as ev
    from sqleval_pipeline.comparisons import COMPARISONS_FILE, GateReport
    from sqleval_pipeline.reporting.gate import gate_report_markdown, render_gate_report
    from sqleval_pipeline.reporting.scorecard import (
        diff_markdown,
        gate_markdown,
        render_diff,
        render_gate,
        render_scorecard,
        scorecard_markdown,
    )

    env = environment_or_fail()
    card, batch = ev.latest_scorecard(env, partition_key)
    if card is None:
        fail(f"no scorecard for {partition_key}")
    render_scorecard(card, console)
    folder = env.store.batch_dir(partition_key, batch.batch_id)
    calls = (f"{batch.provider_calls} provider call(s) made for this batch so far"
             if batch.provider_calls else "no provider call made for this batch")
    console.print(f"batch {batch.batch_id}: {batch.counts}; {calls}; files in {folder}")
    md = [scorecard_markdown(card)]
    passed = True
    d, g = ev.baseline_diff_gate(env, batch)
    if d is not None:
        render_diff(d, console)
        md.append(diff_markdown(d))
    if (folder / COMPARISONS_FILE).exists():
        report = GateReport.model_validate_json((folder / COMPARISONS_FILE).read_text())
        render_gate_report(report, console)
        md.append(gate_report_markdown(report))
        passed = report.passed is not False
    elif g is not None:
        render_gate(g, console)
        md.append(gate_markdown(g))
        passed = g.passed
    if (folder / "calibrated_refusal.json").exists():
        from sqleval_pipeline.scoring import CalibratedRefusal

        cr = CalibratedRefusal.model_validate_json((folder / "calibrated_refusal.json").read_text())
        line = (f"calibrated refusal (strict {cr.strict_config} vs permissive {cr.permissive_config}, "
                f"{len(cr.declined_cases)} declined answerable case(s)): {cr.verdict}")
        console.print(line)
        md.append(f"## Calibrated refusal\n\n{line}")
    try:
        report = ev.calibration_report(env)
    except Exception as exc:  # labels broken: say so, do not hide the scorecard
        err.print(f"[yellow]judge calibration unavailable:[/] {exc}")
        report = None
    if report is not None:
        lines = ev.calibration_lines(report)
        for line in lines:
            console.print(line)
        md.append("## Judge calibration\n\n" + "\n".join(f"- {line}" for line in lines))
    if markdown:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text("\n\n".join(md) + "\n")
        console.print(f"report: {markdown}")
    return passed


def run(
    config: Annotated[Path, typer.Option("--config", "-c", help="Configuration YAML (the project's configs folder)")],
    runs: Annotated[Optional[int], typer.Option(help="Override the configuration's runs")] = None,
    cases: Annotated[Optional[str], typer.Option(help="Comma-separated case ids")] = None,
    split: Annotated[Optional[str], typer.Option(help="dev or heldout")] = None,
    new_batch: Annotated[bool, typer.Option("--new-batch", help="Fresh attempts even if a finished batch exists")] = False,
    report: Annotated[Optional[Path], typer.Option(help="Also write the scorecard/diff/gate as Markdown")] = None,
) -> None:
    """Evaluate one configuration: attempts → guarded executions → grades → scorecard → gate.

    Re-running an unchanged configuration reuses its finished batch (no model calls); an
    interrupted batch resumes where it stopped. Exits 1 when the regression gate fails."""
    from sqleval_pipeline.configs import ConfigError, load_config
    from sqleval_pipeline.orchestrate import EVALUATION_GROUPS

    proj = project()
    try:
        loaded = load_config(config, project=proj)
    except ConfigError as exc:
        fail(str(exc))
    if split and split not in ("dev", "heldout"):
        fail(f"--split must be dev or heldout, not {split!r}")
    from sqleval_pipeline.configs import MIN_RUNS

    if runs is not None and runs < MIN_RUNS and not loaded.config.allow_fewer_runs:
        fail(f"--runs {runs} is below the floor of {MIN_RUNS} (one run has no error bar, spread "
             f"or flip rate); set allow_fewer_runs: true in {config} to override deliberately")
    op_config: dict = {"batch": "new" if new_batch else "latest"}
    if runs:
        op_config["runs"] = runs
    if cases:
        op_config["case_ids"] = [c.strip() for c in cases.split(",") if c.strip()]
    if split:
        op_config["split"] = split
    console.print(f"evaluating [bold]{loaded.partition_key}[/] ({loaded.config.generator.kind}) "
                  f"in project {proj.name}")
    if config.resolve().parent != proj.configs_dir.resolve():
        err.print(f"[yellow]note:[/] {config} is outside the project's configurations folder "
                  f"({proj.configs_dir}): the Dagster UI loads only that folder, so it shows "
                  "this run but cannot re-materialize its partition")
    summary = run_assets(EVALUATION_GROUPS, {"ops": {"eval_attempts": {"config": op_config}}},
                         partition_key=loaded.partition_key, configs_dir=str(config.resolve().parent),
                         show_progress=True, reported_checks=frozenset({"eval_gate:regression_gate"}),
                         tags=loaded.run_tags)
    calls = summary.materialized.get("eval_attempts", {}).get("provider_calls", 0)
    kind = loaded.config.generator.kind
    made = (f"the {kind} generator calls no provider" if kind in OFFLINE_GENERATORS
            else f"this run made {calls} provider call(s)")
    console.print(f"Dagster run {summary.run_id[:8]} in {summary.seconds:.1f} s; {made}")
    if not show_evaluation(loaded.partition_key, markdown=report):
        fail("regression gate failed (comparisons above) and no decision in "
             f"{proj.decisions_path} accepts it; `sqleval show CASE -c {config}` shows a case")
