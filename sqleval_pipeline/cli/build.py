"""``sqleval build``, ``sqleval warehouse build``, ``sqleval snapshot build|verify``."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer
from rich.table import Table

from sqleval_pipeline.cli.common import console, fail, pinned, print_summary, project, run_assets
from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.warehouse import dbt
from sqleval_pipeline.warehouse.foundation import freeze

warehouse_app = typer.Typer(no_args_is_help=True, help="The dbt-built DuckDB warehouse.")
snapshot_app = typer.Typer(no_args_is_help=True, help="The pinned, read-only serving snapshot.")


def build(repin: Annotated[bool, typer.Option(help="Accept a new snapshot id")] = False,
          guardrail_timeout: Annotated[Optional[float], typer.Option(
              "--guardrail-timeout", min=0.1, max=3600,
              help="Statement timeout (seconds) of the hostile suite's run (default: the "
                   "guardrail_suite asset's, 5 s): its resource bombs are stopped by it, the "
                   "same mechanism at any value")] = None,
          guardrail_kill_grace: Annotated[Optional[float], typer.Option(
              "--guardrail-kill-grace", min=0.1, max=60,
              help="Seconds a guard worker has to answer after that timeout before it is killed "
                   "(a bomb DuckDB cannot interrupt; default: the guard policy's kill_grace_s, "
                   "2 s bundled); only lowers it")] = None) -> None:
    """Raw-data step → dbt build → GX-validated snapshot → golden set verified → guardrails
    (one Dagster run of the project's foundation)."""
    # Dagster (~0.7 s to import): loaded by the commands that run assets, not by every command
    from sqleval_pipeline.orchestrate import FOUNDATION_GROUPS

    ops: dict = {"serving_snapshot": {"config": {"repin": repin}}}
    guardrails = {k: v for k, v in (("timeout_s", guardrail_timeout), ("kill_grace_s", guardrail_kill_grace))
                  if v is not None}
    if guardrails:
        ops["guardrail_suite"] = {"config": guardrails}
    summary = run_assets(FOUNDATION_GROUPS, {"ops": ops})
    print_summary(summary, f"sqleval build ({project().name})")


@warehouse_app.command("build")
def warehouse_build() -> None:
    """Run the project's raw-data step (if any) and `dbt build` (models, tests, unit tests)."""
    # Dagster (~0.7 s to import): loaded by the commands that run assets, not by every command
    from sqleval_pipeline.orchestrate import WAREHOUSE_GROUPS

    summary = run_assets(WAREHOUSE_GROUPS)
    print_summary(summary, "warehouse")
    console.print(f"warehouse: {dbt.warehouse_path(project())}")


@snapshot_app.command("build")
def snapshot_build(
    repin: Annotated[bool, typer.Option(help="Accept a new snapshot id (an intended data change)")] = False,
    with_warehouse: Annotated[bool, typer.Option("--with-warehouse", help="Rebuild the warehouse first")] = False,
) -> None:
    """Validate the served models (Great Expectations) and freeze them into the snapshot."""
    # Dagster (~0.7 s to import): loaded by the commands that run assets, not by every command
    from sqleval_pipeline.orchestrate import WAREHOUSE_GROUPS

    wh = dbt.warehouse_path(project())
    if not with_warehouse and not wh.exists():
        fail(f"no warehouse at {wh}; run `sqleval warehouse build` "
             "(or `sqleval snapshot build --with-warehouse`)")
    groups = [*WAREHOUSE_GROUPS, "snapshot"] if with_warehouse else ["snapshot"]
    summary = run_assets(groups, {"ops": {"serving_snapshot": {"config": {"repin": repin}}}})
    meta = summary.materialized.get("serving_snapshot", {})
    print_summary(summary, "snapshot")
    console.print(f"snapshot [bold]{meta.get('snapshot_id')}[/] as of {meta.get('as_of')}: "
                  f"{meta.get('serving_file')}")


@snapshot_app.command("verify")
def snapshot_verify() -> None:
    """Re-hash the serving file against the pinned manifest (rebuilding it from the warehouse
    when it is missing) and fail on any drift."""
    pinned_id, manifest, serving = pinned()
    proj = project()
    started = time.perf_counter()
    if not serving.exists():
        wh = dbt.warehouse_path(proj)
        if not wh.exists():
            fail(f"neither the serving file {serving} nor a warehouse exists; run `sqleval build`")
        console.print(f"serving file missing: rebuilding from {wh}")
        rebuilt = freeze(proj)
        if rebuilt.snapshot_id != pinned_id:
            problems = snap.compare_tables(manifest.tables, rebuilt.tables)
            fail(f"snapshot drift: the warehouse now gives {rebuilt.snapshot_id}, pinned is "
                 f"{pinned_id}:\n  " + "\n  ".join(problems))
    problems = snap.verify_snapshot(serving, manifest)
    if problems:
        fail(f"snapshot drift in {serving} (pinned {pinned_id}):\n  " + "\n  ".join(problems))
    t = Table(title=f"snapshot {pinned_id} (as of {manifest.as_of})")
    for col in ("table", "served from", "rows", "checksum"):
        t.add_column(col)
    for name, info in sorted(manifest.tables.items()):
        t.add_row(name, manifest.sources.get(name, ""), str(info.rows), info.checksum[:16])
    console.print(t)
    console.print(f"[green]verified[/] in {time.perf_counter() - started:.1f} s: every table "
                  f"matches its checksum; no object outside {manifest.serving_schema}")
