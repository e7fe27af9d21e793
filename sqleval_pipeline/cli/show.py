"""``sqleval show CASE``: one golden case as evaluated in one batch (docs/cases.md).

    sqleval show com-012 -c evals/configs/baseline_raw.yaml     # or -c baseline-raw
    sqleval show com-012 --partition baseline-raw@1a2b3c4d --batch b20251201T101500Z-9f0e
    sqleval show com-012 -c baseline-raw --json --max-rows 50
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.markup import escape

from sqleval_pipeline.cli.common import console, fail, project
from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline.pipeline.casefile import case_detail, resolve_config
from sqleval_pipeline.reporting.case import render_case


def show(
    case: Annotated[str, typer.Argument(help="Golden case id, e.g. com-012")],
    config: Annotated[Optional[str], typer.Option(
        "--config", "-c", help="Configuration file, or its name (the project's configs folder)")] = None,
    partition: Annotated[Optional[str], typer.Option(
        "--partition", help="Configuration version <name>@<hash8>, even one whose file changed since")] = None,
    batch: Annotated[Optional[str], typer.Option(
        "--batch", help="Batch id (default: the newest complete batch of that version)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document (docs/cases.md)")] = False,
    max_rows: Annotated[int, typer.Option("--max-rows", min=0, help="Rows shown per result")] = 10,
) -> None:
    """Show one case as evaluated: question, reference SQL and expected result, then every run's
    SQL (or refusal), guarded execution, grade, mismatch and diagnosis."""
    if (config is None) == (partition is None):
        fail("name the configuration: -c CONFIG (a file or a name) or --partition <name>@<hash8>"
             + (", not both" if config else ""))
    try:
        env = ev.environment(project())
        key = partition or resolve_config(env, config).partition_key  # type: ignore[arg-type]
        detail = case_detail(env, case, key, batch_id=batch, max_rows=max_rows)
    except (ev.EvaluationError, ValueError) as exc:
        fail(escape(str(exc)))  # the message quotes what was typed and what is stored: plain text
    if as_json:
        # plain write: the document is data, never console markup or highlighting
        typer.echo(detail.model_dump_json(indent=2))
        return

    render_case(detail, console)
