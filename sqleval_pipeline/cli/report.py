"""``sqleval report`` (one self-contained HTML file) and ``sqleval export`` (scorecard JSON,
per-case Parquet and JSON Lines) of stored evaluations (docs/report.md, docs/exports.md).

    sqleval report                                  # every version with a scorecard
    sqleval report -c baseline-raw -c baseline-curated -o review.html
    sqleval export --partition baseline-raw@1a2b3c4d -o exports/
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional
import time

import typer
from rich.markup import escape

from sqleval_pipeline.cli.common import console, fail, project
from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline.pipeline.casefile import check_partition, resolve_config
from sqleval_pipeline.reporting.exports import export as run_export
from sqleval_pipeline.reporting.html import write_report

ConfigOpt = Annotated[Optional[list[str]], typer.Option(
    "--config", "-c", help="Configuration file or name (repeatable); its current version")]
PartitionOpt = Annotated[Optional[list[str]], typer.Option(
    "--partition", help="Configuration version <name>@<hash8> (repeatable), even one whose file changed")]


def _selection(config: list[str] | None, partition: list[str] | None):
    """(environment, the configuration versions named; [] for every scored version)."""
    try:
        env = ev.environment(project())
        keys = [resolve_config(env, c).partition_key for c in config or []]
        keys += [check_partition(env, p) for p in partition or []]
    except (ev.EvaluationError, ValueError) as exc:
        fail(escape(str(exc)))
    return env, keys


def report(
    config: ConfigOpt = None,
    partition: PartitionOpt = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="HTML file to write "
                                                "(default: <build>/reports/report.html)")] = None,
) -> None:
    """Write one self-contained HTML report: headline accuracy with intervals, slices,
    refusals, failure categories, stability, comparisons and gate, trend, guardrails and a
    filterable case drill-down (default: every configuration version with a scorecard, each
    at its newest batch)."""
    env, keys = _selection(config, partition)
    out = out or project().home.root / "reports" / "report.html"
    t0 = time.perf_counter()
    try:
        path = write_report(env, keys or None, out)
    except (ev.EvaluationError, ValueError) as exc:
        fail(escape(str(exc)))
    console.print(f"report written to {escape(str(path))} ({path.stat().st_size / 1e6:.2f} MB, "
                  f"{time.perf_counter() - t0:.1f} s)", highlight=False)


def export(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write into")],
    config: ConfigOpt = None,
    partition: PartitionOpt = None,
) -> None:
    """Export the scorecard (JSON) and one row per case and run (Parquet and JSON Lines) of
    configuration versions (default: every version with a scorecard); docs/exports.md."""
    env, keys = _selection(config, partition)
    try:
        files = run_export(env, keys or None, out)
    except (ev.EvaluationError, ValueError) as exc:
        fail(escape(str(exc)))
    for f in files:
        console.print(escape(str(f)), highlight=False)
    for why in env.store.unreadable.values():
        console.print(f"[yellow]warning:[/] {escape(why)}", highlight=False)
    console.print(f"{len(files)} files written to {escape(str(out))}", highlight=False)
