"""CLI for scorecards, diffs and the regression gate (mounted by the main ``sqleval`` CLI).

    sqleval scorecard grades.parquet --out scorecard.json [--diagnoses d.jsonl] [--tuned]
    sqleval diff baseline.json candidate.json [--rebase] [--out diff.json] [--markdown diff.md]
    sqleval gate baseline.json candidate.json [--decisions evals/decisions.yaml]
                 [--fail-on-case-regression]        # exit code 1 when the gate fails
"""

from __future__ import annotations

from pathlib import Path

import typer

from sqleval_pipeline.cli.output import CliConsole
from sqleval_pipeline.pipeline.records import Diagnosis, Grade, load_records
from sqleval_pipeline.scoring import stats
from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.scoring.diff import diff
from sqleval_pipeline.scoring.gate import gate, load_decisions
from sqleval_pipeline.reporting.scorecard import (
    diff_markdown,
    gate_markdown,
    render_diff,
    render_gate,
    render_scorecard,
    scorecard_markdown,
)
from sqleval_pipeline.scoring.scorecard import Scorecard, build_scorecard
from sqleval_pipeline.textfiles import write_atomically
from sqleval_pipeline.project import current

app = typer.Typer(help="Scorecards, paired diffs and the regression gate.", no_args_is_help=True)
console = CliConsole()


def _fail(msg: str, code: int = 2) -> None:
    console.print(f"[red]error:[/red] {msg}")
    raise typer.Exit(code)


@app.command("scorecard")
def scorecard_cmd(
    grades: Path = typer.Argument(..., exists=True, dir_okay=False, help="grades (.parquet, .jsonl or .json)"),
    out: Path | None = typer.Option(None, "--out", "-o", help="write the scorecard JSON here"),
    diagnoses: Path | None = typer.Option(None, "--diagnoses", exists=True, dir_okay=False),
    config_version: str | None = typer.Option(None, "--config-version", help="pick one configuration"),
    tuned: bool = typer.Option(False, "--tuned", help="label: measured after tuning on these cases"),
    label: str | None = typer.Option(None, "--label"),
    markdown: Path | None = typer.Option(None, "--markdown", help="also write a Markdown report"),
    seed: int = typer.Option(stats.DEFAULT_SEED, "--seed"),
    resamples: int = typer.Option(stats.DEFAULT_RESAMPLES, "--resamples"),
) -> None:
    """Build a scorecard from stored grades (+ diagnoses) and print it."""
    try:
        gs = load_records(grades, Grade)
        ds = load_records(diagnoses, Diagnosis) if diagnoses else []
        sc = build_scorecard(gs, ds, config_version=config_version, tuned=tuned, label=label,
                             seed=seed, resamples=resamples)
    except SqlevalError as e:
        _fail(str(e))
        return
    render_scorecard(sc, console)
    if out:
        sc.save(out)
        console.print(f"scorecard written to {out}")
    if markdown:
        write_atomically(markdown, scorecard_markdown(sc))


@app.command("diff")
def diff_cmd(
    baseline: Path = typer.Argument(..., exists=True, dir_okay=False),
    candidate: Path = typer.Argument(..., exists=True, dir_okay=False),
    rebase: bool = typer.Option(False, "--rebase", help="compare across grader/snapshot changes knowingly"),
    out: Path | None = typer.Option(None, "--out", "-o"),
    markdown: Path | None = typer.Option(None, "--markdown"),
    seed: int = typer.Option(stats.DEFAULT_SEED, "--seed"),
    resamples: int = typer.Option(stats.DEFAULT_RESAMPLES, "--resamples"),
) -> None:
    """Paired diff of two scorecard JSON files."""
    try:
        d = diff(Scorecard.load(baseline), Scorecard.load(candidate), rebase=rebase, seed=seed, resamples=resamples)
    except SqlevalError as e:  # IncomparableScorecards, InputError (a damaged file) ...
        _fail(str(e))
        return
    render_diff(d, console)
    if out:
        d.save(out)
        console.print(f"diff written to {out}")
    if markdown:
        write_atomically(markdown, diff_markdown(d))


@app.command("gate")
def gate_cmd(
    baseline: Path = typer.Argument(..., exists=True, dir_okay=False),
    candidate: Path = typer.Argument(..., exists=True, dir_okay=False),
    decisions: Path | None = typer.Option(None, "--decisions",
                                          help="default: the project's decisions file"),
    fail_on_case_regression: bool = typer.Option(False, "--fail-on-case-regression"),
    rebase: bool = typer.Option(False, "--rebase"),
    out: Path | None = typer.Option(None, "--out", "-o"),
    markdown: Path | None = typer.Option(None, "--markdown"),
) -> None:
    """Regression gate: exit code 1 when the candidate regresses without a recorded decision."""
    if decisions is None:
        decisions = current().decisions_path
    try:
        result = gate(Scorecard.load(baseline), Scorecard.load(candidate), load_decisions(decisions),
                      fail_on_case_regression=fail_on_case_regression, rebase=rebase)
    except SqlevalError as e:  # IncomparableScorecards, InputError (a damaged file) ...
        _fail(str(e))
        return
    render_gate(result, console)
    if out:
        write_atomically(out, result.to_json())
    if markdown:
        write_atomically(markdown, gate_markdown(result))
    if not result.passed:
        raise typer.Exit(1)


if __name__ == "__main__":  # pragma: no cover
    app()
