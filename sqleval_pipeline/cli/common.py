"""What every command group shares: consoles, failing with a sentence, the selected
project, and in-process materialization of the Dagster assets (one pipeline).

The consoles never cut a table outside a terminal (``cli/output.py``); a materialization
stops on SIGTERM as on Ctrl-C (``cli/signals.py``) and writes Python warnings to its log."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import NoReturn

import typer
from rich.markup import escape
from rich.table import Table
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sqleval_pipeline.cli import signals
from sqleval_pipeline.cli.output import CliConsole, warnings_to
from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.golden.loader import GoldenError, load_golden
from sqleval_pipeline.pipeline import progress as progress_hook
from sqleval_pipeline.project import current, ProjectError

console = CliConsole()
err = CliConsole(stderr=True)


def fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(code)


def project():
    """The selected project (``--project``, ``SQLEVAL_PROJECT``, ./sqleval.yaml, the demo)."""
    try:
        return current()
    except ProjectError as exc:
        fail(str(exc))


def run_log_path(partition_key: str | None = None) -> Path:
    """The log of the newest run of a command (one per configuration version: runs of
    several versions at once keep their own): dbt's streamed log and Python warnings."""
    log_dir = project().home.root / "logs"
    return log_dir / (f"last-run.{partition_key}.log" if partition_key else "last-run.log")


def run_assets(groups: list[str], run_config: dict | None = None, *, partition_key: str | None = None,
               configs_dir: str | None = None, show_progress: bool = False,
               reported_checks: frozenset[str] = frozenset(), tags: dict[str, str] | None = None,
               quiet: bool = False):
    """Materialize asset groups of the project in-process. dbt's streamed log and Python
    warnings go to a file, not the screen; long stages drive rich progress bars (none when
    ``quiet``).

    A run that failed only because blocking checks in ``reported_checks`` (``asset:check``)
    failed returns its summary: the caller reports those verdicts itself (``sqleval run``
    prints the diff and the gate, then exits 1) instead of a bare Dagster error.

    SIGTERM or SIGINT stop the run: one line says so and the command exits 143 or 130."""
    # Dagster (~0.7 s to import): loaded by the commands that run assets, not by every command
    from sqleval_pipeline.orchestrate import RunFailed, materialize

    proj = project()
    log_path = run_log_path(partition_key)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    screen = CliConsole(file=sys.stdout, quiet=quiet)
    label = f"{', '.join(groups)}" + (f" for {partition_key}" if partition_key else "")
    failure = None
    bars = Progress(TextColumn("{task.description:>12}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=screen, transient=False)
    tasks: dict[str, int] = {}

    def sink(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bars.add_task(stage, total=total)
        bars.update(tasks[stage], completed=done, total=total)

    show_progress = show_progress and not quiet
    ctx = bars if show_progress else screen.status(f"materializing {label} (log: {log_path}) …")
    with signals.interruptible() as interrupts:
        with ctx:
            if show_progress:
                progress_hook.set_sink(sink)
            try:
                with log_path.open("w") as log, contextlib.redirect_stdout(log), warnings_to(log):
                    summary = materialize(groups, run_config, project=proj, partition_key=partition_key,
                                          configs_dir=configs_dir, tags=tags)
            except KeyboardInterrupt:  # SIGINT, or SIGTERM, outside Dagster's own handlers
                failure = "interrupted"
            except (RunFailed, ProjectError) as exc:
                failure = exc
            except Exception as exc:  # dbt/Dagster setup errors: say what, keep the log
                failure = f"{type(exc).__name__}: {exc}"
            finally:
                progress_hook.set_sink(None)
        if signals.received(interrupts):
            # Dagster turned the signal into an interrupted run (or it came outside the run)
            raise typer.Exit(signals.finish_interrupted(interrupts))
    if isinstance(failure, RunFailed) and failure.check_failure and failure.summary is not None \
            and failure.failed_checks and failure.failed_checks <= reported_checks:
        return failure.summary
    if failure is not None:
        fail(f"{failure}\n(full log: {log_path})")
    return summary


def pinned():
    """(id, manifest, serving path) of the project's pinned snapshot."""
    proj = project()
    try:
        return snap.pinned_snapshot(proj.manifest_dir, proj.home.snapshot_dir)
    except snap.SnapshotError as exc:
        fail(str(exc))


def load_golden_or_fail(path: Path):
    try:
        return load_golden(path, **project().taxonomy)
    except GoldenError as exc:
        fail(str(exc))


def print_summary(summary, title: str) -> None:
    """What a run produced: served tables with row counts, snapshot id, golden set, checks."""
    mats = summary.materialized
    t = Table(title=title)
    t.add_column("stage")
    t.add_column("result")
    raw = {k: m["rows"] for k, m in mats.items() if "rows" in m and k not in ("serving_snapshot",)}
    if raw:
        t.add_row("raw data", f"{len(raw)} tables, {sum(raw.values()):,} rows")
    own = {"serving_snapshot", "golden_set", "guardrail_suite", "judge_calibration", "test_suite"}
    dbt = [k for k in mats if k not in raw and k not in own and not k.startswith("eval_")]
    if dbt:
        t.add_row("dbt warehouse", f"{len(dbt)} models/seeds built and tested")
    if "serving_snapshot" in mats:
        m = mats["serving_snapshot"]
        tables = m.get("tables") or {}
        t.add_row("serving snapshot", f"{m.get('snapshot_id')} as of {m.get('as_of')}; "
                  f"{m.get('expectations_passed')} GX expectations passed")
        for name, rows in sorted(tables.items()):
            t.add_row("", f"  {name}: {rows:,} rows")
        notes = m.get("not_served") or []
        for note in notes[:3]:
            t.add_row("", f"  [dim]{escape(note)}[/]")
        if len(notes) > 3:
            t.add_row("", f"  [dim]… and {len(notes) - 3} more notes (serving_snapshot metadata, "
                      "`not_served`)[/]")
    if "guardrail_suite" in mats:
        m = mats["guardrail_suite"]
        t.add_row("guardrails", f"{m.get('cases')} hostile cases, {m.get('got_through')} got "
                  f"through ({m.get('seconds')} s); snapshot checksum checked")
    if "golden_set" in mats:
        t.add_row("golden set", f"{mats['golden_set'].get('cases')} cases reproduce on "
                  f"{mats['golden_set'].get('snapshot_id')}")
    if "test_suite" in mats:
        m = mats["test_suite"]
        weak = m.get("weak_cases") or []
        if not m.get("neighbours") and not m.get("cases"):
            t.add_row("test suite", "no case has a reference to distil yet: its neighbour databases are "
                      f"built with the first cases; suite {m.get('suite')}")
        else:
            t.add_row("test suite", f"{m.get('neighbours')} neighbour databases, {m.get('cases')} cases distilled "
                      f"(mean kill rate {100 * float(m.get('mean_kill_rate') or 0):.0f}%; {len(weak)} weak"
                      + (f": {', '.join(weak[:5])}" if weak else "") + f"); suite {m.get('suite')}")
    console.print(t)
    bad = [k for k, ok in summary.checks.items() if not ok]
    console.print(f"{len(mats)} assets materialized in {summary.seconds:.1f} s "
                  f"(Dagster run {summary.run_id[:8]}); "
                  f"{len(summary.checks) - len(bad)}/{len(summary.checks)} asset checks passed"
                  + (f" (failed: {', '.join(bad)})" if bad else ""))
