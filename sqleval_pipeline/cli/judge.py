"""``sqleval judge sample | label | calibrate``: human labels for the judges, and how far each
judge's categories can be trusted (docs/configurations.md, judges)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.prompt import Prompt

from sqleval_pipeline.cli.common import console, fail, project
from sqleval_pipeline.textfiles import write_atomically
from sqleval_pipeline.judging.calibration import LabelError
from sqleval_pipeline.judging.labelling import label_session, pending, queue_path, sample
from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline.reporting.calibration import calibration_markdown, render_calibration
from sqleval_pipeline.reporting.case import render_case

app = typer.Typer(no_args_is_help=True, help="Label failed attempts and calibrate the judges")


def _env():
    try:
        return ev.environment(project())
    except (ev.EvaluationError, ValueError) as exc:
        fail(escape(str(exc)))


@app.command("sample")
def sample_cmd(
    n: Annotated[int, typer.Option("-n", min=1, help="Attempts to add to the labelling queue")] = 20,
    seed: Annotated[int, typer.Option(help="Random seed (the draw is reproducible)")] = 0,
) -> None:
    """Draw a stratified sample of failed attempts (by rules category × configuration, no
    attempt twice, identical runs once) into the labelling queue."""
    env = _env()
    picked = sample(env, n, seed=seed)
    if not picked:
        console.print("no new failed attempt to sample (everything is labelled or queued, or "
                      "no configuration has a finished batch: run `sqleval run -c …` first)")
        return
    strata: dict[str, int] = {}
    for q in picked:
        strata[q.stratum] = strata.get(q.stratum, 0) + 1
    console.print(f"{len(picked)} attempt(s) queued in {queue_path(env.labels_dir)}:")
    for s, k in sorted(strata.items()):
        console.print(f"  {escape(s)}: {k}")
    console.print("label them with `sqleval judge label --labeler NAME`")


@app.command("label")
def label_cmd(
    labeler: Annotated[str, typer.Option("--labeler", help="Your name (recorded on every label)")],
) -> None:
    """Label the queued attempts one by one (question, reference and candidate SQL, result
    difference; the judges' verdicts are not shown). Every label is saved at once; run it
    again to resume."""
    env = _env()
    todo = pending(env.labels_dir, labeler)
    if not todo:
        fail("nothing to label: the queue is empty or done; add attempts with `sqleval judge sample -n N`")
    console.print(f"{len(todo)} attempt(s) to label as {escape(labeler)}; q quits, s skips")

    def show(thing) -> None:
        if isinstance(thing, str):
            console.print(f"[yellow]{escape(thing)}[/]")
            return
        detail, item = thing
        runs = [r.model_copy(update={"diagnoses": []}) for r in detail.runs
                if r.run_index == item.run_index]
        console.rule(f"{escape(item.config_name)} · {escape(item.case_id)} · run {item.run_index}")
        render_case(detail.model_copy(update={"runs": runs}), console)

    def ask(prompt: str) -> str:
        return Prompt.ask(escape(prompt), console=console, default="")

    try:
        done = label_session(env, labeler, ask, show)
    except (EOFError, KeyboardInterrupt):
        console.print("\nstopped; every label given so far is saved")
        raise typer.Exit(0) from None
    console.print(f"{done['labelled']} labelled, {done['skipped']} skipped; "
                  f"{len(pending(env.labels_dir, labeler))} left")


@app.command("calibrate")
def calibrate_cmd(
    markdown: Annotated[Optional[Path], typer.Option(help="Also write the report as Markdown")] = None,
) -> None:
    """Each judge's agreement with the human labels, Cohen's kappa with its 95% interval, the
    confusion matrix and the rules-versus-LLM disagreement table."""
    env = _env()
    try:
        report = ev.calibration_report(env)
    except LabelError as exc:
        fail(escape(str(exc)))
    if report is None:
        fail(f"no labels in {env.labels_dir}: `sqleval judge sample -n 20`, then `sqleval judge label`")
    render_calibration(report, console)
    if markdown:
        write_atomically(markdown, calibration_markdown(report))
        console.print(f"report: {markdown}")
