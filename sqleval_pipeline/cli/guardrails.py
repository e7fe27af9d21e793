"""``sqleval guardrails``: run the hostile suite against the guard.

    sqleval guardrails run [--cases FILE ...] [--json OUT] [--junit FILE] [--snapshot PATH] [--timeout S] [--kill-grace S]
    sqleval guardrails report [-o FILE.html]

Runs the project's suite (the bundled templates instantiated over its served tables and
sensitive models, or the project's own files) or the given files on the pinned serving
snapshot (or ``--snapshot``), prints a table (case, category, blocked by, reason, ms) and a
summary per category, verifies the snapshot file's SHA-256 is unchanged afterwards, and exits
1 if any case got through or the checksum changed (2 on a setup error). Question cases are
answered by the adversarial test double (it obeys every injection), so the run proves the
non-prompt layers whatever a model would do. A case of your own that the guard allowed only
because it reads a served table it names is printed as a warning, *not hostile on this
project*, and does not fail the run.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Optional
import socket

import typer
from rich.markup import escape
from rich.table import Table

from sqleval_pipeline.cli.output import CliConsole
from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.textfiles import write_atomically
from sqleval_pipeline import snapshot as snap
from sqleval_pipeline.guard.executor import GuardedExecutor, GuardSetupError
from sqleval_pipeline.guard.hostile import run_suite
from sqleval_pipeline.guard.policy import PolicyError, project_policy
from sqleval_pipeline.guard.sandbox import SandboxError
from sqleval_pipeline.guard.statement_filter import StatementFilter
from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline.project import current, ProjectError
from sqleval_pipeline.reporting.junit import guardrails_junit
from sqleval_pipeline.warehouse.foundation import hostile_suite

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Guarded execution and the hostile suite.")
console = CliConsole()
err = CliConsole(stderr=True)


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {escape(str(message))}", highlight=False)
    raise typer.Exit(code)


def _resolve_snapshot(snapshot: Path | None, manifest_file: Path | None = None):
    """(serving file, manifest) of the project's pinned snapshot, or of ``--snapshot``
    (whose manifest is looked up by its id among the project's pins)."""
    try:
        project = current()
    except ProjectError as exc:
        _fail(str(exc))
    if snapshot is None:
        try:
            _pinned, manifest, snapshot = snap.pinned_snapshot(project.manifest_dir,
                                                               project.home.snapshot_dir)
        except snap.SnapshotError as exc:
            _fail(f"{exc} (or pass --snapshot)")
    else:
        mpath = manifest_file or snap.manifest_path(project.manifest_dir, snapshot.stem)
        if not mpath.exists():
            _fail(f"no manifest for {snapshot.name} in {project.manifest_dir}: the as-of date "
                  "and served tables come from it; pass --manifest or a snapshot this project built")
        try:
            manifest = snap.SnapshotManifest.from_file(mpath)
        except snap.SnapshotError as exc:
            _fail(str(exc))
        if manifest.snapshot_id != snapshot.stem:
            _fail(f"{mpath} describes {manifest.snapshot_id}, not {snapshot.name}")
    if not snapshot.exists():
        _fail(f"serving file {snapshot} is missing; run `sqleval snapshot build`")
    return project, snapshot, manifest


@app.command("run")
def run(
    cases: Annotated[Optional[list[Path]], typer.Option("--cases", help="hostile case file(s) (JSON Lines)")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the full report as JSON")] = None,
    snapshot: Annotated[Optional[Path], typer.Option("--snapshot", help="serving snapshot file")] = None,
    manifest_file: Annotated[Optional[Path], typer.Option("--manifest", help="its manifest (default: "
                                                          "among the project's pins)")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="statement timeout for the run, seconds "
                                                             "(bombs are contained within it)")] = 5.0,
    kill_grace: Annotated[Optional[float], typer.Option(
        "--kill-grace", min=0.1, max=60, help="seconds a worker has to answer after the timeout before "
                                              "it is killed (default: the guard policy's; only lowers it)")] = None,
    log: Annotated[Optional[Path], typer.Option("--log", help="append every execution record (JSONL)")] = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="write the run as JUnit XML: one test "
                                                  "case per hostile case (docs/ci.md)")] = None,
) -> None:
    """Run the hostile suite; exit non-zero if anything got through or the snapshot changed."""
    logging.getLogger("sqleval_pipeline.guard").setLevel(logging.WARNING)
    project, path, manifest = _resolve_snapshot(snapshot, manifest_file)
    try:
        suite, skipped, notes = hostile_suite(project, manifest, files=cases or None)
        for template_id, why in skipped:
            console.print(f"[yellow]not instantiated[/] {escape(str(template_id))}: {escape(str(why))}",
                          highlight=False)
        for note in notes:
            console.print(f"note: {escape(note)}", highlight=False)
    except SqlevalError as exc:  # HostileCaseError, InputError ...
        _fail(str(exc))
    try:
        executor = GuardedExecutor(path, as_of=manifest.as_of, log_path=log,
                                   policy=project_policy(project, manifest))
    except (GuardSetupError, PolicyError, SandboxError) as exc:
        _fail(str(exc))
    with executor:
        with console.status(f"running {len(suite)} hostile cases on {escape(path.name)} …"):
            report = run_suite(suite, executor, timeout_s=timeout, kill_grace_s=kill_grace)

    # every text from a case, the SQL or the database is escaped: `[/x]` is not rich markup
    table = Table(title=f"hostile suite on {escape(path.name)}")
    for col in ("case", "category", "verdict", "blocked by", "reason", "ms"):
        table.add_column(col, justify="right" if col == "ms" else "left")
    for v in report.verdicts:
        colour = {"blocked": "green", "declined": "yellow", "not_hostile": "yellow"}.get(v.verdict, "bold red")
        if v.verdict == "blocked_by_error" and not v.failed:
            colour = "yellow"
        reason = v.reason or ""
        if not v.expect_met:
            reason += f" (expected {'/'.join(v.expect)})"
        table.add_row(escape(v.case_id), escape(v.category), f"[{colour}]{v.verdict}[/]",
                      escape(v.blocked_by or "-"), escape(reason), f"{v.elapsed_ms:.0f}")
    console.print(table)

    summary = Table(title="per category")
    layers = ("filter", "database", "sandbox", "cap")
    for col in ("category", "cases", "blocked", *layers, "sql error", "declined", "not hostile", "got through"):
        summary.add_column(col, justify="left" if col == "category" else "right")
    for cat, row in sorted(report.summary().items()):
        summary.add_row(escape(cat), str(row["cases"]), str(row["blocked"]),
                        *(str(row.get(f"by_{layer}", 0)) for layer in layers),
                        str(row.get("blocked_by_error", 0)), str(row["declined"]),
                        str(row.get("not_hostile", 0)), str(row["got_through"]))
    console.print(summary)

    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(json_out, json.dumps(report.to_json(), indent=2, default=str) + "\n")
        console.print(f"report written to {json_out}", markup=False, highlight=False)
    if junit:
        try:
            write_atomically(junit, guardrails_junit(report.to_json(), skipped=skipped,
                                                     hostname=socket.gethostname() or "localhost"))
        except OSError as exc:
            _fail(f"cannot write the JUnit XML to {junit}: {exc.strerror or exc}")
        console.print(f"JUnit XML written to {junit}", markup=False, highlight=False)
    for v in report.not_hostile:
        console.print(f"[yellow]not hostile on this project:[/] {escape(v.case_id)}: {escape(v.warning or '')} — "
                      f"{escape(repr(v.sql))}", highlight=False)
    for v in report.unproven:
        out = err if v.failed else console
        out.print(f"[{'bold red' if v.failed else 'yellow'}]not proven blocked by a guard layer:[/] "
                  f"{escape(v.case_id)}: {escape(v.reason or '')}: {escape(v.message or '')} — "
                  f"{escape(repr(v.sql))}", highlight=False)
    through = report.failures
    ok_sum = "unchanged" if report.checksum_unchanged else "[bold red]CHANGED[/]"
    console.print(f"{len(report.verdicts)} cases in {report.seconds:.1f} s; "
                  f"snapshot checksum {ok_sum} ({report.checksum_after[:16]}…)")
    if through:
        for v in through:
            if v.verdict != "got_through":
                continue  # reported above
            err.print(f"[bold red]got through:[/] {escape(v.case_id)}: {escape(str(v.status))} "
                      f"{escape(v.reason or '')} {escape('; '.join(v.escapes))} — {escape(repr(v.sql))}",
                      highlight=False)
            for line in v.sample:
                err.print(f"    {line}", markup=False, highlight=False)
    if through or not report.checksum_unchanged:
        raise typer.Exit(1)
    aside = (f" ({len(report.not_hostile)} case(s) not hostile on this project, listed above)"
             if report.not_hostile else "")
    console.print(f"[green]every hostile case was blocked by a non-prompt layer[/]{aside}")


@app.command("check")
def check(sql: Annotated[str, typer.Argument(help="SQL text to check")],
          filter_only: Annotated[bool, typer.Option("--filter-only", help="only sqlglot's view (needs only "
                                                     "the pinned manifest, not the serving file)")] = False) -> None:
    """Decide one SQL text as the guard would, without executing it: the statement filter,
    the pinned clock, then DuckDB's own view (parse tree and bound plan) on the pinned
    serving file. Exit 0 when it would run, 1 when it is refused."""
    try:  # the filter needs only the pinned manifest (served tables), not the built file
        project = current()
        pinned = snap.read_pinned(project.manifest_dir)
        if pinned is None:
            _fail(f"no pinned snapshot in {project.manifest_dir}; run `sqleval build`")
        manifest = snap.SnapshotManifest.from_file(snap.manifest_path(project.manifest_dir, pinned))
        policy = project_policy(project, manifest)
    except (ProjectError, snap.SnapshotError, PolicyError) as exc:
        _fail(str(exc))
    serving = snap.serving_path(project.home.snapshot_dir, pinned)
    if filter_only or not serving.exists():
        v = StatementFilter(policy, database_names={manifest.snapshot_id}).check(sql)
        note = "" if filter_only else (f"; DuckDB's view not checked: {serving.name} is not built here "
                                       "(run `sqleval build`)")
        if v.allowed:
            console.print(f"[green]allowed by the statement filter[/] (tables: {escape(', '.join(v.tables) or '-')}; "
                          f"{v.elapsed_ms:.2f} ms{escape(note)})", highlight=False)
            return
        console.print(f"[red]refused[/] {escape(str(v.reason))}: {escape(str(v.message))}", highlight=False)
        raise typer.Exit(1)
    logging.getLogger("sqleval_pipeline.guard").setLevel(logging.WARNING)
    try:
        with GuardedExecutor(serving, as_of=manifest.as_of, policy=policy, pool_size=1) as guard:
            r = guard.decide(sql)
    except (GuardSetupError, SandboxError) as exc:
        _fail(str(exc))
    rewritten = f"; runs as {r.executed_sql!r}" if r.executed_sql and r.executed_sql != sql else ""
    if r.ok:
        console.print(f"[green]allowed[/] (tables: {escape(', '.join(r.tables) or '-')}; "
                      f"{r.elapsed_ms:.2f} ms{escape(rewritten)})", highlight=False)
        return
    label = "refused" if r.status == "refused" else f"{r.status}"
    console.print(f"[red]{label}[/] {escape(str(r.reason))}: {escape(str(r.message))}", highlight=False)
    raise typer.Exit(1)


@app.command("report")
def report(out: Annotated[Optional[Path], typer.Option("--out", "-o", help="HTML file to write (default: "
                                                       "<build>/reports/guardrails.html)")] = None) -> None:
    """Write the security evidence pack as one self-contained HTML file: the guard policy in
    force, the database settings read back from DuckDB, every hostile case of the last suite
    run with the layer that stopped it, and the snapshot checksum before and after."""
    # matplotlib and the page's templates (~0.7 s): only when the evidence page is written
    from sqleval_pipeline.reporting.html.page import write_evidence

    try:
        project = current()
        path = write_evidence(ev.environment(project), out or project.home.root / "reports" / "guardrails.html")
    except (ProjectError, ev.EvaluationError, ValueError) as exc:
        _fail(str(exc))
    console.print(f"evidence pack written to {path}", markup=False, highlight=False)
