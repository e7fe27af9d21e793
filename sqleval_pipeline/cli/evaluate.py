"""``sqleval run``: one configuration evaluated; its verdict, then its scorecard, diff and gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional
import os
import socket

import typer

from sqleval_pipeline.pipeline import batch_files as bf, evaluation as ev
from sqleval_pipeline.cli.common import console, err, fail, project, run_assets, run_log_path
from sqleval_pipeline.cli.output import warnings_to
from sqleval_pipeline.cli.verdict import build_verdict, render_verdict
from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.configs import ConfigError, load_config, MIN_RUNS
from sqleval_pipeline.pipeline.comparisons import baseline_diff_gate, COMPARISONS_FILE, GateReport
from sqleval_pipeline.pipeline.environment import environment
from sqleval_pipeline.pipeline.noop import unchanged_batch
from sqleval_pipeline.reporting.annotations import github_annotations
from sqleval_pipeline.reporting.ci_batch import annotation_root, golden_locations, load_batch_results, relative_path
from sqleval_pipeline.reporting.gate import gate_report_markdown, render_gate_report
from sqleval_pipeline.reporting.junit import evaluation_junit
from sqleval_pipeline.reporting.pr_summary import code, pr_summary
from sqleval_pipeline.reporting.scorecard import (
    diff_markdown, gate_markdown, render_diff, render_gate, render_scorecard, scorecard_markdown,
)
from sqleval_pipeline.scoring import CalibratedRefusal
from sqleval_pipeline.textfiles import write_atomically

#: generators that answer without calling a model provider (their calls are not counted)
OFFLINE_GENERATORS = frozenset({"baseline", "recorded"})


#: the exit code of `sqleval run` for an inconclusive batch (an outage, not a regression)
INCONCLUSIVE_EXIT = 3


def _inconclusive(partition_key: str, batch_id: str | None = None) -> bool:
    """Whether the batch's scorecard (default: the version's newest) is an outage (too many
    ERROR attempts)."""
    card, _batch = ev.latest_scorecard(environment_or_fail(), partition_key, batch_id)
    return card is not None and card.inconclusive


def batch_of(summary) -> str | None:
    """The batch an evaluation run made or reused (its attempts asset's metadata)."""
    value = summary.materialized.get("eval_attempts", {}).get("batch_id") if summary is not None else None
    return str(value) if value else None


def environment_or_fail():
    try:
        return ev.environment(project())
    except (ev.EvaluationError, ValueError) as exc:
        fail(str(exc))


def show_evaluation(partition_key: str, *, batch_id: str | None = None, markdown: Path | None = None,
                    output: str = "full") -> bool:
    """Print the verdict of a batch of a configuration version (``batch_id``: the one a run
    made or reused; default: the newest) — gate status, accuracy with its interval, newly
    failing cases — then its scorecard, diff and gate; True if the gate passed or had nothing
    to compare with.

    ``output``: ``full``; ``quiet`` (the verdict block only); ``json`` (one JSON object on
    stdout, nothing else). The Markdown report is written in every mode."""
    full = output == "full"
    env = environment_or_fail()
    card, batch = ev.latest_scorecard(env, partition_key, batch_id)
    if card is None:
        fail(f"no scorecard for {partition_key}")
    folder = env.store.batch_dir(partition_key, batch.batch_id)

    d, g = baseline_diff_gate(env, batch)
    report = (GateReport.model_validate_json((folder / COMPARISONS_FILE).read_text())
              if (folder / COMPARISONS_FILE).exists() else None)
    verdict = build_verdict(card, batch, folder, report=report, gate=g, diff=d, markdown=markdown)
    passed = (report.passed is not False) if report is not None else (g.passed if g is not None else True)
    if output == "json":
        typer.echo(json.dumps(verdict.to_json(), indent=2, ensure_ascii=False))
    else:
        render_verdict(verdict, console)
    if full:
        console.print()
        render_scorecard(card, console)
    calls = (f"{batch.provider_calls} provider call(s) made for this batch so far"
             if batch.provider_calls else "no provider call made for this batch")
    if full:
        console.print(f"batch {batch.batch_id}: {batch.counts}; {calls}; files in {folder}")
    md = [scorecard_markdown(card)]
    if d is not None:
        if full:
            render_diff(d, console)
        md.append(diff_markdown(d))
    if report is not None:
        if full:
            render_gate_report(report, console)
        md.append(gate_report_markdown(report))
    elif g is not None:
        if full:
            render_gate(g, console)
        md.append(gate_markdown(g))
    if (folder / bf.CALIBRATED_REFUSAL).exists():
        cr = CalibratedRefusal.model_validate_json((folder / bf.CALIBRATED_REFUSAL).read_text())
        line = (f"calibrated refusal (strict {cr.strict_config} vs permissive {cr.permissive_config}, "
                f"{len(cr.declined_cases)} declined answerable case(s)): {cr.verdict}")
        if full:
            console.print(line)
        md.append(f"## Calibrated refusal\n\n{line}")
    if full or markdown:
        try:
            calibration = ev.calibration_report(env)
        except Exception as exc:  # labels broken: say so, do not hide the scorecard
            if full:
                err.print(f"[yellow]judge calibration unavailable:[/] {exc}")
            calibration = None
        if calibration is not None:
            lines = ev.calibration_lines(calibration)
            for line in lines if full else ():
                console.print(line)
            md.append("## Judge calibration\n\n" + "\n".join(f"- {line}" for line in lines))
    if markdown:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text("\n\n".join(md) + "\n")
        if full:
            console.print(f"report: {markdown}")
    return passed


def write_ci_outputs(partition_key: str, *, batch_id: str | None = None, junit: Path | None = None,
                     summary: Path | None = None, annotations: bool = False, config: Path | None = None,
                     output: str = "full") -> None:
    """A batch of a configuration version (``batch_id``; default: the newest) in CI's formats
    (docs/ci.md): JUnit XML, a pull-request summary, GitHub workflow commands (stdout; stderr
    with ``--json``)."""
    env = environment_or_fail()
    proj = env.project
    _card, batch = ev.latest_scorecard(env, partition_key, batch_id)
    if batch is None:
        fail(f"no scorecard for {partition_key}")
    root = annotation_root(proj.root, dict(os.environ))
    try:
        results = load_batch_results(env.store.batch_dir(partition_key, batch.batch_id),
                                     golden_locations(proj.golden_dir, root))
    except SqlevalError as exc:
        fail(str(exc))
    written = []

    def write(path: Path, text: str, what: str) -> None:
        try:
            write_atomically(path, text)
        except OSError as exc:
            fail(f"cannot write the {what} to {path}: {exc.strerror or exc}; give a file in a "
                 "writable folder")
        written.append(f"{what}: {path}")

    if junit is not None:
        write(junit, evaluation_junit(results, hostname=socket.gethostname() or "localhost"), "JUnit XML")
    if summary is not None:
        pointer = (None if results.report_html is None
                   else f"full report: {code(relative_path(results.report_html, root))}")
        write(summary, pr_summary(results, pointer=pointer), "pull-request summary")
    for line in written if output == "full" else ():
        console.print(line, markup=False, highlight=False)
    if annotations:
        cfg = relative_path(config, root) if config is not None else None
        for line in github_annotations(results, cfg):
            typer.echo(line, err=output == "json")


def _unchanged(loaded, op_config: dict, configs_dir: Path):
    """The batch whose every stage output is current (pipeline/noop.py), or None: then the
    evaluation runs. A project that cannot be read here is left for the run to report."""
    try:
        env = environment(project(), configs_dir=configs_dir)
        return unchanged_batch(env, loaded, runs=op_config.get("runs"), case_ids=op_config.get("case_ids"),
                               split=op_config.get("split"))
    except SqlevalError:
        return None


def run(
    config: Annotated[Path, typer.Option("--config", "-c", help="Configuration YAML (the project's configs folder)")],
    runs: Annotated[Optional[int], typer.Option(help="Override the configuration's runs")] = None,
    cases: Annotated[Optional[str], typer.Option(help="Comma-separated case ids")] = None,
    split: Annotated[Optional[str], typer.Option(help="dev or heldout")] = None,
    new_batch: Annotated[bool, typer.Option("--new-batch", help="Fresh attempts even if a finished batch exists")] = False,
    report: Annotated[Optional[Path], typer.Option(help="Also write the scorecard/diff/gate as Markdown")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the verdict (and errors)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print only the verdict as one JSON object "
                                          "(docs/command-line.md); no progress bars")] = False,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Also write the results as JUnit XML: "
                                                  "one test case per golden case and per gate "
                                                  "comparison (docs/ci.md)")] = None,
    summary_md: Annotated[Optional[Path], typer.Option("--summary", help="Also write a pull-request "
                                                       "comment in Markdown, under GitHub's 65,536 "
                                                       "characters (docs/ci.md)")] = None,
    annotations: Annotated[bool, typer.Option("--github-annotations", help="Print GitHub workflow "
                                              "commands: an ::error for a failing gate and for each "
                                              "newly failing case at its golden file and line "
                                              "(on stderr with --json)")] = False,
) -> None:
    """Evaluate one configuration: attempts → guarded executions → grades → scorecard → gate.

    Prints the verdict first (gate status, accuracy with its 95% interval, newly failing
    cases), then the details. Re-running an unchanged configuration reuses its finished batch
    (no model calls); an interrupted batch resumes where it stopped (SIGINT/SIGTERM exit 130/
    143). Exits 1 when the regression gate fails."""
    proj = project()
    try:
        loaded = load_config(config, project=proj)
    except ConfigError as exc:
        fail(str(exc))
    if split and split not in ("dev", "heldout"):
        fail(f"--split must be dev or heldout, not {split!r}")

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
    output = "json" if as_json else "quiet" if quiet else "full"
    full = output == "full"
    if full:
        console.print(f"evaluating [bold]{loaded.partition_key}[/] ({loaded.config.generator.kind}) "
                      f"in project {proj.name}")
        if config.resolve().parent != proj.configs_dir.resolve():
            err.print(f"[yellow]note:[/] {config} is outside the project's configurations folder "
                      f"({proj.configs_dir}): the Dagster UI loads only that folder, so it shows "
                      "this run but cannot re-materialize its partition")
    reused = None if new_batch else _unchanged(loaded, op_config, config.resolve().parent)
    summary = None
    if reused is None:
        from sqleval_pipeline.orchestrate import EVALUATION_GROUPS  # imports Dagster: only when it runs

        summary = run_assets(EVALUATION_GROUPS, {"ops": {"eval_attempts": {"config": op_config}}},
                             partition_key=loaded.partition_key, configs_dir=str(config.resolve().parent),
                             show_progress=True, reported_checks=frozenset({"eval_gate:regression_gate"}),
                             tags=loaded.run_tags, quiet=not full)
    # what is shown is the batch this run made or reused, not the version's newest: a run of
    # other cases or runs may have come after it
    used = reused.batch_id if reused is not None else batch_of(summary)
    # warnings raised while reading the results go to the run's log too
    with run_log_path(loaded.partition_key).open("a") as log, warnings_to(log):
        passed = show_evaluation(loaded.partition_key, batch_id=used, markdown=report, output=output)
        if junit or summary_md or annotations:
            write_ci_outputs(loaded.partition_key, batch_id=used, junit=junit, summary=summary_md,
                             annotations=annotations, config=config, output=output)
    if full and summary is None:
        console.print(f"nothing changed since batch {reused.batch_id}: its attempts, executions, grades, "
                      "diagnoses, scorecard, gate and report are current, so no Dagster run was started "
                      "and no provider was called (--new-batch evaluates again)")
    elif full:
        calls = summary.materialized.get("eval_attempts", {}).get("provider_calls", 0)
        kind = loaded.config.generator.kind
        made = (f"the {kind} generator calls no provider" if kind in OFFLINE_GENERATORS
                else f"this run made {calls} provider call(s)")
        console.print(f"Dagster run {summary.run_id[:8]} in {summary.seconds:.1f} s; {made}")
    if not passed and _inconclusive(loaded.partition_key, used):
        fail("the batch is inconclusive: too many attempts are ERROR (a provider outage or a harness "
             "fault) to measure the system; no gate passes it. Run the same command again once the "
             "provider works: only its ERROR attempts are asked again", code=INCONCLUSIVE_EXIT)
    if not passed:
        fail("regression gate failed (" + ("comparisons above" if full else "verdict above")
             + f") and no decision in {proj.decisions_path} accepts it; "
             f"`sqleval show CASE -c {config}` shows a case")
