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


def _run(groups: list[str], run_config: dict | None = None, *, partition_key: str | None = None,
         configs_dir: str | None = None, show_progress: bool = False):
    """Materialize asset groups in-process. dbt's streamed log goes to a file, not the screen;
    long stages drive rich progress bars."""
    import contextlib

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from sqleval_pipeline import progress as progress_hook
    from sqleval_pipeline.orchestrate import RunFailed, materialize

    log_dir = paths.home().root / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / "last-run.log"
    screen = Console(file=sys.stdout)
    label = f"{', '.join(groups)}" + (f" for {partition_key}" if partition_key else "")
    failure = None
    bars = Progress(TextColumn("{task.description:>12}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=screen, transient=False)
    tasks: dict[str, int] = {}

    def sink(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bars.add_task(stage, total=total)
        bars.update(tasks[stage], completed=done, total=total)

    ctx = bars if show_progress else screen.status(f"materializing {label} (log: {log_path}) …")
    with ctx:
        if show_progress:
            progress_hook.set_sink(sink)
        try:
            with log_path.open("w") as log, contextlib.redirect_stdout(log):
                summary = materialize(groups, run_config, partition_key=partition_key,
                                      configs_dir=configs_dir)
        except RunFailed as exc:
            failure = exc
        finally:
            progress_hook.set_sink(None)
    if failure is not None:
        fail(f"{failure}\n(full log: {log_path})")
    return summary


def _pinned():
    from sqleval_pipeline import snapshot as snap

    try:
        return snap.pinned_snapshot(paths.SNAPSHOT_MANIFEST_DIR, paths.home().snapshot_dir)
    except snap.SnapshotError as exc:
        fail(str(exc))


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
    if "guardrail_suite" in mats:
        m = mats["guardrail_suite"]
        t.add_row("guardrails", f"{m.get('cases')} hostile cases, {m.get('got_through')} got "
                  f"through ({m.get('seconds')} s); snapshot checksum checked")
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
    from sqleval_pipeline.golden.loader import write_cases

    pinned, manifest, serving = _pinned()
    wanted = set(cases.split(",")) if cases else None
    gs = _load_golden(golden)
    if wanted and (unknown := wanted - set(gs.by_id())):
        fail(f"unknown case id(s): {', '.join(sorted(unknown))}")
    by_file: dict[Path, list] = {}
    for c in gs.cases:  # in file order
        by_file.setdefault(gs.locations[c.id][0], []).append(c)
    n = 0
    for f, file_cases in by_file.items():
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


@golden_app.command("add")
def golden_add(
    question: Annotated[str, typer.Option(help="The question as the user asked it")],
    sql: Annotated[Optional[str], typer.Option(help="Corrected reference SQL (omit: unverified case)")] = None,
    difficulty: Annotated[str, typer.Option(help="simple_aggregate, filtered_aggregate, multi_condition, time_window, top_k or trap")] = "filtered_aggregate",
    band: Annotated[str, typer.Option(help="answerable, needs_definition or should_refuse")] = "answerable",
    cluster: Annotated[str, typer.Option(help="Group of related questions, e.g. the fact table")] = "orders",
    split: Annotated[str, typer.Option(help="dev or heldout")] = "dev",
    order_matters: Annotated[bool, typer.Option("--order-matters")] = False,
    traps: Annotated[Optional[str], typer.Option(help="Comma-separated trap names")] = None,
    case_id: Annotated[Optional[str], typer.Option("--id", help="Default: the next free id")] = None,
    source: Annotated[str, typer.Option(help="Where the case came from")] = "production wrong-answer report",
    author: Annotated[str, typer.Option(help="Who wrote the reference SQL")] = "unknown",
    reviewer: Annotated[Optional[str], typer.Option(help="Reviewer; without one the case stays unverified")] = None,
    file: Annotated[Path, typer.Option("--file", help="Golden file to append to")] = paths.GOLDEN_DIR / "commerce.jsonl",
) -> None:
    """Turn a production wrong-answer report into a golden case: question + corrected SQL →
    frozen expected result, appended to the domain file."""
    from sqleval_pipeline.golden.growth import GrowthError, add_case

    pinned, manifest, serving = _pinned()
    try:
        case = add_case(file, question=question, sql=sql, difficulty=difficulty, band=band,
                        cluster=cluster, serving=serving, snapshot_id=pinned, as_of=manifest.as_of,
                        split=split, order_matters=order_matters,
                        traps=[t.strip() for t in traps.split(",")] if traps else None,
                        case_id=case_id, source=source, author=author, reviewer=reviewer)
    except Exception as exc:  # GrowthError, FreezeError, GoldenError: all name what to fix
        fail(f"{type(exc).__name__}: {exc}" if not isinstance(exc, GrowthError) else str(exc))
    rows = len(case.expected.rows) if case.expected else 0
    console.print(f"added [bold]{case.id}[/] ({case.status}) to {file}: "
                  + (f"{rows} expected row(s) frozen on {pinned}" if case.expected else
                     "no reference SQL yet: it runs with an execution-only score until reviewed"))


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


def _show_evaluation(partition_key: str, *, markdown: Path | None = None) -> bool:
    """Print the newest scorecard, diff and gate of a configuration version; True if the gate
    passed or had nothing to compare with."""
    from sqleval_pipeline import evaluation as ev
    from sqleval_pipeline.scoring import Diff, GateResult
    from sqleval_pipeline.scoring.render import (
        diff_markdown,
        gate_markdown,
        render_diff,
        render_gate,
        render_scorecard,
        scorecard_markdown,
    )

    env = ev.environment()
    card, batch = ev.latest_scorecard(env, partition_key)
    if card is None:
        fail(f"no scorecard for {partition_key}")
    render_scorecard(card, console)
    folder = env.store.batch_dir(partition_key, batch.batch_id)
    console.print(f"batch {batch.batch_id}: {batch.counts}; {batch.provider_calls} provider call(s) "
                  f"made for this batch so far; files in {folder}")
    md = [scorecard_markdown(card)]
    passed = True
    if (folder / "gate.json").exists():
        d = Diff.model_validate_json((folder / "diff.json").read_text())
        g = GateResult.model_validate_json((folder / "gate.json").read_text())
        render_diff(d, console)
        render_gate(g, console)
        md += [diff_markdown(d), gate_markdown(g)]
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


@app.command("run")
def run(
    config: Annotated[Path, typer.Option("--config", "-c", help="Configuration YAML (evals/configs/*.yaml)")],
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

    try:
        loaded = load_config(config)
    except ConfigError as exc:
        fail(str(exc))
    if split and split not in ("dev", "heldout"):
        fail(f"--split must be dev or heldout, not {split!r}")
    op_config: dict = {"batch": "new" if new_batch else "latest"}
    if runs:
        op_config["runs"] = runs
    if cases:
        op_config["case_ids"] = [c.strip() for c in cases.split(",") if c.strip()]
    if split:
        op_config["split"] = split
    console.print(f"evaluating [bold]{loaded.partition_key}[/] ({loaded.config.generator.kind})")
    summary = _run(EVALUATION_GROUPS, {"ops": {"eval_attempts": {"config": op_config}}},
                   partition_key=loaded.partition_key, configs_dir=str(config.resolve().parent),
                   show_progress=True)
    calls = summary.materialized.get("eval_attempts", {}).get("provider_calls", 0)
    console.print(f"Dagster run {summary.run_id[:8]} in {summary.seconds:.1f} s; this run made "
                  f"{calls} provider call(s)")
    if not _show_evaluation(loaded.partition_key, markdown=report):
        fail("regression gate failed: accuracy dropped below the baseline without a recorded "
             "decision (evals/decisions.yaml)")


@app.command("demo")
def demo() -> None:
    """The main job on the embedded default (no key, no network): build the warehouse and the
    pinned snapshot, verify the golden set, then evaluate the offline baseline with curation
    off and on, and gate the curated one against the raw one."""
    from sqleval_pipeline.configs import load_config
    from sqleval_pipeline.orchestrate import EVALUATION_GROUPS, FOUNDATION_GROUPS

    summary = _run(FOUNDATION_GROUPS)
    _print_summary(summary, "sqleval demo: foundation")
    golden_stats(paths.GOLDEN_DIR, False)
    for name in ("baseline_raw.yaml", "baseline_curated.yaml"):
        loaded = load_config(paths.EVALS_DIR / "configs" / name)
        console.rule(f"evaluating {loaded.partition_key}")
        s = _run(EVALUATION_GROUPS, partition_key=loaded.partition_key, show_progress=True)
        console.print(f"Dagster run {s.run_id[:8]} in {s.seconds:.1f} s")
        ok = _show_evaluation(loaded.partition_key,
                              markdown=paths.home().root / "reports" / f"{loaded.name}.md")
        if not ok:
            fail(f"regression gate failed for {loaded.partition_key}")
    from sqleval_pipeline.judging.calibration import render_calibration
    from sqleval_pipeline.orchestrate import JUDGING_GROUPS

    from sqleval_pipeline import evaluation as ev
    from sqleval_pipeline.judging.calibration import CalibrationReport

    console.rule("judge calibration against human labels (evals/labels)")
    _run(JUDGING_GROUPS)
    stored = ev.calibration_path(ev.environment())
    if stored.exists():  # written by the judge_calibration asset that just ran
        render_calibration(CalibrationReport.model_validate_json(stored.read_text()), console)
    console.print(f"Dagster runs are recorded in {paths.home().dagster_home}: `make ui` to browse "
                  "them and follow lineage from a scorecard back to the rows.")


def _mount_subcommands() -> None:
    from sqleval_pipeline.guard.cli import app as guard_app
    from sqleval_pipeline.scoring.cli import app as scoring_app

    app.registered_commands.extend(scoring_app.registered_commands)  # scorecard, diff, gate
    app.add_typer(guard_app, name="guardrails", help="Guarded execution and the hostile suite")


_mount_subcommands()


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
