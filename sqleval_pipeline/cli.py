"""The ``sqleval`` command line. Long work materializes the same Dagster assets the UI shows."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from sqleval_pipeline import paths

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Evaluate a text-to-SQL system on pinned data, with hard guardrails.")
warehouse_app = typer.Typer(no_args_is_help=True, help="The dbt-built DuckDB warehouse.")
snapshot_app = typer.Typer(no_args_is_help=True, help="The pinned, read-only serving snapshot.")
golden_app = typer.Typer(no_args_is_help=True, help="The golden set of question → SQL → result.")
app.add_typer(warehouse_app, name="warehouse")
app.add_typer(snapshot_app, name="snapshot")
app.add_typer(golden_app, name="golden")

console = Console()
err = Console(stderr=True)


def fail(message: str, code: int = 1) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def _run(groups: list[str], run_config: dict | None = None):
    """Materialize asset groups in-process; dbt's streamed log goes to a file, not the screen."""
    import contextlib

    from sqleval_pipeline.orchestrate import RunFailed, materialize

    log_dir = paths.home().root / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / "last-run.log"
    screen = Console(file=sys.stdout)
    with screen.status(f"materializing {', '.join(groups)} (log: {log_path}) …"):
        with log_path.open("w") as log, contextlib.redirect_stdout(log):
            try:
                summary = materialize(groups, run_config)
            except RunFailed as exc:
                failure = exc
            else:
                failure = None
    if failure is not None:
        fail(f"{failure}\n(full log: {log_path})")
    return summary


def _pinned():
    from sqleval_pipeline import snapshot as snap

    pinned = snap.read_pinned(paths.SNAPSHOT_MANIFEST_DIR)
    if pinned is None:
        fail("no pinned snapshot (snapshots/pinned); run `sqleval snapshot build` first")
    manifest = snap.SnapshotManifest.from_file(snap.manifest_path(paths.SNAPSHOT_MANIFEST_DIR, pinned))
    return pinned, manifest, snap.serving_path(paths.home().snapshot_dir, pinned)


def _load_golden(path: Path):
    from sqleval_pipeline.golden.loader import GoldenError, load_golden

    try:
        return load_golden(path)
    except GoldenError as exc:
        fail(str(exc))


def _print_summary(summary, title: str) -> None:
    """What a run produced: served tables with row counts, snapshot id, golden set, checks."""
    mats = summary.materialized
    t = Table(title=title)
    t.add_column("stage")
    t.add_column("result")
    raw = {k: m["rows"] for k, m in mats.items() if k.startswith("raw") and "rows" in m}
    if raw:
        t.add_row("raw data", f"{len(raw)} tables, {sum(raw.values()):,} rows (orders: "
                  f"{raw.get('raw/orders', 0):,})")
    dbt = [k for k in mats if k.split("/")[0] in ("staging", "marts", "hr", "pii")]
    if dbt:
        t.add_row("dbt warehouse", f"{len(dbt)} models built and tested")
    if "serving_snapshot" in mats:
        m = mats["serving_snapshot"]
        tables = m.get("tables") or {}
        t.add_row("serving snapshot", f"{m.get('snapshot_id')} as of {m.get('as_of')}; "
                  f"{m.get('expectations_passed')} GX expectations passed")
        for name, rows in sorted(tables.items()):
            t.add_row("", f"  {name}: {rows:,} rows")
    if "golden_set" in mats:
        t.add_row("golden set", f"{mats['golden_set'].get('cases')} cases reproduce on "
                  f"{mats['golden_set'].get('snapshot_id')}")
    console.print(t)
    bad = [k for k, ok in summary.checks.items() if not ok]
    console.print(f"{len(mats)} assets materialized in {summary.seconds:.1f} s "
                  f"(Dagster run {summary.run_id[:8]}); "
                  f"{len(summary.checks) - len(bad)}/{len(summary.checks)} asset checks passed"
                  + (f" (failed: {', '.join(bad)})" if bad else ""))


# ---- warehouse --------------------------------------------------------------------------


@warehouse_app.command("build")
def warehouse_build() -> None:
    """Generate the raw data, load it and run `dbt build` (models, data tests, unit tests)."""
    from sqleval_pipeline.orchestrate import WAREHOUSE_GROUPS

    summary = _run(WAREHOUSE_GROUPS)
    _print_summary(summary, "warehouse")
    console.print(f"warehouse: {paths.home().warehouse}")


# ---- snapshot ---------------------------------------------------------------------------


@snapshot_app.command("build")
def snapshot_build(
    repin: Annotated[bool, typer.Option(help="Accept a new snapshot id (an intended data change)")] = False,
    with_warehouse: Annotated[bool, typer.Option("--with-warehouse", help="Rebuild the warehouse first")] = False,
) -> None:
    """Validate the marts (Great Expectations) and freeze them into the serving snapshot."""
    from sqleval_pipeline.orchestrate import WAREHOUSE_GROUPS

    if not with_warehouse and not paths.home().warehouse.exists():
        fail(f"no warehouse at {paths.home().warehouse}; run `sqleval warehouse build` "
             "(or `sqleval snapshot build --with-warehouse`)")
    groups = [*WAREHOUSE_GROUPS, "snapshot"] if with_warehouse else ["snapshot"]
    summary = _run(groups, {"ops": {"serving_snapshot": {"config": {"repin": repin}}}})
    meta = summary.materialized.get("serving_snapshot", {})
    _print_summary(summary, "snapshot")
    console.print(f"snapshot [bold]{meta.get('snapshot_id')}[/] as of {meta.get('as_of')}: "
                  f"{meta.get('path')}")


@snapshot_app.command("verify")
def snapshot_verify() -> None:
    """Re-hash the serving file against the pinned manifest (rebuilding it from the warehouse
    when it is missing) and fail on any drift."""
    from sqleval_pipeline import snapshot as snap

    pinned, manifest, serving = _pinned()
    home = paths.home()
    started = time.perf_counter()
    if not serving.exists():
        if not home.warehouse.exists():
            fail(f"neither the serving file {serving} nor a warehouse exists; run `sqleval build`")
        console.print(f"serving file missing: rebuilding from {home.warehouse}")
        rebuilt = snap.freeze_snapshot(home.warehouse, home.snapshot_dir, paths.SNAPSHOT_MANIFEST_DIR,
                                       manifest.as_of, validate=True)
        if rebuilt.snapshot_id != pinned:
            problems = snap.compare_tables(manifest.tables, rebuilt.tables)
            fail(f"snapshot drift: the warehouse now gives {rebuilt.snapshot_id}, pinned is "
                 f"{pinned}:\n  " + "\n  ".join(problems))
    problems = snap.verify_snapshot(serving, manifest)
    if problems:
        fail(f"snapshot drift in {serving} (pinned {pinned}):\n  " + "\n  ".join(problems))
    t = Table(title=f"snapshot {pinned} (as of {manifest.as_of})")
    for col in ("table", "rows", "checksum"):
        t.add_column(col)
    for name, info in sorted(manifest.tables.items()):
        t.add_row(name, str(info.rows), info.checksum[:16])
    console.print(t)
    console.print(f"[green]verified[/] in {time.perf_counter() - started:.1f} s: every table "
                  "matches its checksum; no object outside main")


# ---- golden -----------------------------------------------------------------------------

GoldenPath = Annotated[Path, typer.Option("--golden", help="Golden file or directory")]


@golden_app.command("validate")
def golden_validate(golden: GoldenPath = paths.GOLDEN_DIR) -> None:
    """Load and validate the golden set (schema, ids, coverage) without running anything."""
    from sqleval_pipeline.golden.stats import validate_coverage

    gs = _load_golden(golden)
    shortfalls = validate_coverage(gs.cases)
    for s in shortfalls:
        err.print(f"[yellow]coverage:[/] {s}")
    console.print(f"{len(gs)} cases valid in {', '.join(gs.domains())}")


@golden_app.command("freeze")
def golden_freeze(
    golden: GoldenPath = paths.GOLDEN_DIR,
    cases: Annotated[Optional[str], typer.Option(help="Comma-separated case ids (default: all)")] = None,
) -> None:
    """Run reference SQL on the pinned snapshot and store expected results (never by hand)."""
    from sqleval_pipeline.golden.freeze import FreezeError, freeze_cases
    from sqleval_pipeline.golden.loader import golden_files, load_golden, write_cases

    pinned, manifest, serving = _pinned()
    wanted = set(cases.split(",")) if cases else None
    gs = _load_golden(golden)
    if wanted and (unknown := wanted - set(gs.by_id())):
        fail(f"unknown case id(s): {', '.join(sorted(unknown))}")
    n = 0
    for f in golden_files(golden):
        file_cases = load_golden(f).cases
        todo = [c for c in file_cases if wanted is None or c.id in wanted]
        if not todo:
            continue
        try:
            frozen = {c.id: c for c in freeze_cases(todo, serving, pinned, manifest.as_of)}
        except FreezeError as exc:
            fail(f"{f}: {exc}")
        write_cases(f, [frozen.get(c.id, c) for c in file_cases])
        n += len(todo)
    console.print(f"froze {n} case(s) against {pinned} (as of {manifest.as_of})")


@golden_app.command("verify")
def golden_verify(golden: GoldenPath = paths.GOLDEN_DIR) -> None:
    """Re-run every reference on the pinned snapshot; fail naming every case that drifted."""
    from sqleval_pipeline.golden.freeze import verify_cases

    pinned, manifest, serving = _pinned()
    gs = _load_golden(golden)
    started = time.perf_counter()
    with console.status(f"re-running {len(gs)} reference queries on {pinned} …"):
        drifts = verify_cases(gs.cases, serving, pinned, manifest.as_of)
    if drifts:
        fail(f"snapshot drift: {len(drifts)} case(s) do not reproduce on {pinned}:\n  "
             + "\n  ".join(str(d) for d in drifts)
             + "\nThe evaluation stops here: fix the data or re-freeze the named cases "
             "(`sqleval golden freeze --cases …`) after review.")
    n_ref = sum(1 + len(c.alternative_sqls) for c in gs.cases if c.reference_sql)
    console.print(f"[green]verified[/] {len(gs)} cases ({n_ref} reference queries) reproduce on "
                  f"{pinned} in {time.perf_counter() - started:.1f} s")


@golden_app.command("stats")
def golden_stats(golden: GoldenPath = paths.GOLDEN_DIR,
                 as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Counts per difficulty × band × split."""
    from sqleval_pipeline.golden.stats import STATS_HEADER, counts, stats_rows

    gs = _load_golden(golden)
    if as_json:
        data = [{"difficulty": d, "band": b, "split": s, "cases": n}
                for (d, b, s), n in sorted(counts(gs.cases).items())]
        console.print_json(json.dumps(data))
        return
    t = Table(title=f"golden set: {len(gs)} cases ({', '.join(gs.domains())}); cells are dev/heldout")
    for h in STATS_HEADER:
        t.add_column(h, justify="right" if h != "difficulty" else "left")
    for row in stats_rows(gs.cases):
        t.add_row(*row)
    console.print(t)


# ---- whole pipeline ---------------------------------------------------------------------


@app.command("build")
def build(repin: Annotated[bool, typer.Option(help="Accept a new snapshot id")] = False) -> None:
    """Raw data → dbt warehouse → GX-validated snapshot → golden set verified (Dagster job)."""
    from sqleval_pipeline.orchestrate import FOUNDATION_GROUPS

    summary = _run(FOUNDATION_GROUPS, {"ops": {"serving_snapshot": {"config": {"repin": repin}}}})
    _print_summary(summary, "sqleval build")


@app.command("demo")
def demo() -> None:
    """Run the main job on the embedded default (no key, no network) and print a summary."""
    from sqleval_pipeline.orchestrate import FOUNDATION_GROUPS

    summary = _run(FOUNDATION_GROUPS)
    _print_summary(summary, "sqleval demo")
    golden_stats(paths.GOLDEN_DIR, False)
    snap_meta = summary.materialized.get("serving_snapshot", {})
    console.print(f"pinned snapshot [bold]{snap_meta.get('snapshot_id')}[/] as of "
                  f"{snap_meta.get('as_of')}; Dagster runs are in {paths.home().dagster_home} "
                  "(`make ui` to browse them)")


def _mount_optional(module: str, name: str, help_text: str) -> None:
    """Mount sub-apps of later stages when their module is present."""
    import importlib

    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("sqleval_pipeline"):
            return
        raise
    sub = getattr(mod, "app", None)
    if sub is not None:
        if name:
            app.add_typer(sub, name=name, help=help_text)
        else:
            for cmd in sub.registered_commands:
                app.registered_commands.append(cmd)


_mount_optional("sqleval_pipeline.scoring.cli", "", "Scorecards, diffs and the regression gate")
_mount_optional("sqleval_pipeline.guard.cli", "guardrails", "Guarded execution and the hostile suite")


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
