"""``sqleval golden …``: validate, freeze, verify, stats, add one case, import a file."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Optional
import getpass

import typer
from rich.table import Table
from rich.markup import escape

from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.cli.common import console, err, fail, load_golden_or_fail, pinned, project
from sqleval_pipeline.textfiles import write_atomically
from sqleval_pipeline.configs import ConfigError, load_config
from sqleval_pipeline.dialect import schema_from_manifest
from sqleval_pipeline.generation.context import load_catalog
from sqleval_pipeline.golden.audit import audit_cases
from sqleval_pipeline.golden.dedup import read_rejected, rejected_path, rejected_records
from sqleval_pipeline.golden.describe import model_writer
from sqleval_pipeline.golden.freeze import freeze_cases, FreezeError
from sqleval_pipeline.golden.growth import add_case, GrowthError
from sqleval_pipeline.golden.importers import read_questions
from sqleval_pipeline.golden.importing import import_rows, unservable_reasons
from sqleval_pipeline.golden.loader import golden_files, GoldenChanged, write_cases
from sqleval_pipeline.golden.propose import append_proposals, propose
from sqleval_pipeline.golden.review import review, ReviewContext
from sqleval_pipeline.golden.stats import counts, STATS_HEADER, stats_rows, validate_coverage
from sqleval_pipeline.golden.verify import verify_cases
from sqleval_pipeline.golden.vocabulary import vocabulary
from sqleval_pipeline.guard.executor import GuardedExecutor, GuardSetupError
from sqleval_pipeline.guard.policy import PolicyError, project_policy
from sqleval_pipeline.providers import ProviderError
from sqleval_pipeline.semantic import project_glossary
from sqleval_pipeline.semantic.glossary import GlossaryError
from sqleval_pipeline.suite.audit import insensitive, project_suite, weak_cases
from sqleval_pipeline.suite.neighbours import check_params
from sqleval_pipeline.warehouse import dbt

golden_app = typer.Typer(no_args_is_help=True, help="The golden set of question → SQL → result.")

GoldenPath = Annotated[Optional[Path], typer.Option("--golden", help="Golden file or directory "
                                                     "(default: the project's golden folder)")]


def _golden(golden: Path | None) -> Path:
    return golden or project().golden_dir


@golden_app.command("validate")
def golden_validate(golden: GoldenPath = None) -> None:
    """Load and validate the golden set (schema, ids, taxonomy, coverage) without running it."""
    gs = load_golden_or_fail(_golden(golden))
    for s in validate_coverage(gs.cases, project().difficulties):
        err.print(f"[yellow]coverage:[/] {s}")
    console.print(f"{len(gs)} cases valid in {', '.join(gs.domains())}")


@golden_app.command("freeze")
def golden_freeze(
    golden: GoldenPath = None,
    cases: Annotated[Optional[str], typer.Option(help="Comma-separated case ids (default: all)")] = None,
) -> None:
    """Run reference SQL on the pinned snapshot and store expected results (never by hand)."""
    pinned_id, manifest, serving = pinned()
    wanted = set(cases.split(",")) if cases else None
    gs = load_golden_or_fail(_golden(golden))
    # what each file held when read: a file changed meanwhile is not overwritten
    befores = {gs.locations[c.id][0]: gs.locations[c.id][0].read_bytes() for c in gs.cases}
    if wanted and (unknown := wanted - set(gs.by_id())):
        fail(f"unknown case id(s): {', '.join(sorted(unknown))}")
    by_file: dict[Path, list] = {}
    for c in gs.cases:  # in file order
        by_file.setdefault(gs.locations[c.id][0], []).append(c)
    n = 0
    notes: list = []
    for f, file_cases in by_file.items():
        todo = [c for c in file_cases if wanted is None or c.id in wanted]
        if not todo:
            continue
        try:
            frozen = {c.id: c for c in freeze_cases(todo, serving, pinned_id, manifest.as_of,
                                                    notes=notes)}
        except FreezeError as exc:
            fail(f"{f}: {exc}")
        try:
            write_cases(f, [frozen.get(c.id, c) for c in file_cases], before=befores[f])
        except GoldenChanged as exc:
            fail(str(exc))
        n += len(todo)
    # ties at a LIMIT cut (recorded), a LIMIT without ORDER BY, shapes freezing cannot analyse
    for note in notes:
        err.print(f"[yellow]note:[/] {note.case_id} {note.reading}: {note.detail}", highlight=False)
    console.print(f"froze {n} case(s) against {pinned_id} (as of {manifest.as_of})"
                  + (f"; {len(notes)} note(s) above" if notes else ""))


@golden_app.command("verify")
def golden_verify(golden: GoldenPath = None) -> None:
    """Re-run every reference on the pinned snapshot; fail naming every case that drifted."""
    pinned_id, manifest, serving = pinned()
    gs = load_golden_or_fail(_golden(golden))
    started = time.perf_counter()
    with console.status(f"re-running {len(gs)} reference queries on {pinned_id} …"):
        drifts = verify_cases(gs.cases, serving, pinned_id, manifest.as_of)
    if drifts:
        fail(f"snapshot drift: {len(drifts)} case(s) do not reproduce on {pinned_id}:\n  "
             + "\n  ".join(str(d) for d in drifts)
             + "\nThe evaluation stops here: fix the data or re-freeze the named cases "
             "(`sqleval golden freeze --cases …`) after review.")
    n_ref = sum(1 + len(c.alternative_sqls) for c in gs.cases if c.reference_sql)
    console.print(f"[green]verified[/] {len(gs)} cases ({n_ref} reference queries) reproduce on "
                  f"{pinned_id} in {time.perf_counter() - started:.1f} s")


@golden_app.command("audit")
def golden_audit(
    golden: GoldenPath = None,
    cases: Annotated[Optional[str], typer.Option(help="Comma-separated case ids (default: all)")] = None,
    json_path: Annotated[Optional[Path], typer.Option("--json", help="Also write the report "
                                                      "as JSON to this file")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 1)")] = False,
    runs: Annotated[int, typer.Option(min=1, max=10, help="Runs of every reference")] = 3,
    suite: Annotated[bool, typer.Option("--suite", help="Also distil each case's test suite on neighbour "
                                        "databases and list weak and insensitive cases (docs/test-suite.md)")] = False,
    suite_neighbours: Annotated[Optional[int], typer.Option(
        "--suite-neighbours", min=1, max=200, help="Neighbour databases to build with --suite (default 12)")] = None,
) -> None:
    """Run every reviewed reference as if a system had answered it (guard, grading, three
    runs) and flag weak ones; exit 1 on any error (with --strict, on any warning). With
    --suite, also list the cases whose result few mutants of the reference change."""
    proj = project()
    pinned_id, manifest, serving = pinned()
    gs = load_golden_or_fail(_golden(golden))
    wanted = [c.strip() for c in cases.split(",") if c.strip()] if cases else None
    if wanted and (unknown := sorted(set(wanted) - set(gs.by_id()))):
        fail(f"unknown case id(s): {', '.join(unknown)}")
    todo = [c for c in gs.cases if wanted is None or c.id in wanted]
    try:
        guard = GuardedExecutor(serving, as_of=manifest.as_of, policy=project_policy(proj, manifest))
    except (GuardSetupError, PolicyError) as exc:
        fail(str(exc))
    with guard, console.status(f"auditing {len(todo)} case(s) on {pinned_id} …") as status:
        report = audit_cases(todo, serving=serving, snapshot_id=pinned_id, as_of=manifest.as_of,
                             guard=guard, runs=runs,
                             progress=lambda stage, done, total: status.update(
                                 f"auditing {len(todo)} case(s) on {pinned_id}: {stage} …"))
    flagged = report.flagged()
    unreviewed = [s for s in report.skipped if s.code == "unreviewed"]
    if flagged or unreviewed:
        t = Table(title=f"golden audit on {pinned_id} (as of {manifest.as_of})")
        for col in ("case", "checks failed", "details"):
            t.add_column(col, overflow="fold")
        for ca in flagged:
            codes = [f"[red]{f.code}[/]" if f.severity == "error" else f"[yellow]{f.code}[/]"
                     for f in ca.findings]
            details = [escape(f"{f.reading + ': ' if f.reading else ''}{f.detail}") for f in ca.findings]
            t.add_row(ca.case_id, "\n".join(codes), "\n".join(details))
        for s in unreviewed:
            t.add_row(s.case_id, "[dim]skipped[/]", escape(s.detail))
        console.print(t)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(json_path, report.model_dump_json(indent=2) + "\n")
    colour = "red" if report.errors else ("yellow" if report.warnings else "green")
    console.print(f"[{colour}]{escape(report.summary())}[/]"
                  + (f"; report: {json_path}" if json_path else ""), highlight=False)
    if suite:
        _suite_section(proj, gs.cases, {c.id for c in todo}, suite_neighbours)
    code = report.exit_code(strict)
    if code and not report.errors:
        err.print("[yellow]--strict:[/] warnings fail the audit")
    raise typer.Exit(code)


def _suite_section(proj, cases: list, wanted: set[str], neighbours: int | None) -> None:
    """The test-suite section of ``golden audit --suite``: neighbours and suites of the whole
    golden set (built or reused), weak and insensitive cases among ``wanted``. Advisory: it
    never changes the exit code."""
    try:
        with console.status("test suite: neighbours and mutants …") as status:
            rep = project_suite(proj, cases, params=check_params(neighbours, None),
                                progress=lambda stage, done, total: status.update(
                                    f"test suite: {stage} {done}/{total} …"))
    except SqlevalError as exc:
        fail(str(exc))
    kinds = {e.id: e.kind for e in rep.nset.manifest.neighbours}
    flagged = [(c, "insensitive") for c in rep.suite.cases.values() if c.case_id in wanted and insensitive(c)]
    flagged += [(c, "weak") for c in weak_cases(rep.suite) if c.case_id in wanted]
    if flagged:
        t = Table(title="test suite: cases few mutants of the reference tell apart")
        for col in ("case", "finding", "kill rate", "mutants (snapshot / neighbours / surviving)", "suite",
                    "surviving, e.g."):
            t.add_column(col, overflow="fold")
        for c, what in flagged:
            rate = "n/a" if c.kill_rate is None else f"{c.kill_rate:.0%}"
            t.add_row(c.case_id, f"[yellow]{what}[/]", rate,
                      f"{c.mutants} ({c.killed_by_snapshot} / {c.killed_by_neighbours} / {len(c.surviving)})",
                      ", ".join(kinds.get(n, n) for n in c.neighbours) or "-",
                      escape("\n".join(m.detail for m in c.surviving[:3])))
        console.print(t)
    console.print(f"{escape(rep.summary())}; suite: {rep.path}", highlight=False, soft_wrap=True)


@golden_app.command("add")
def golden_add(
    question: Annotated[str, typer.Option(help="The question as the user asked it")],
    sql: Annotated[Optional[str], typer.Option(help="Corrected reference SQL (omit: unverified case)")] = None,
    difficulty: Annotated[Optional[str], typer.Option(help="One of the project's difficulties "
                                                      "(default: the second, else the first)")] = None,
    band: Annotated[str, typer.Option(help="answerable, needs_definition or should_refuse")] = "answerable",
    cluster: Annotated[Optional[str], typer.Option(help="Group of related questions, e.g. the "
                                                   "fact table (default: the taxonomy's default)")] = None,
    split: Annotated[str, typer.Option(help="dev or heldout")] = "dev",
    order_matters: Annotated[bool, typer.Option("--order-matters")] = False,
    traps: Annotated[Optional[str], typer.Option(help="Comma-separated trap names")] = None,
    case_id: Annotated[Optional[str], typer.Option("--id", help="Default: the next free id")] = None,
    source: Annotated[str, typer.Option(help="Where the case came from")] = "production wrong-answer report",
    author: Annotated[str, typer.Option(help="Who wrote the reference SQL")] = "unknown",
    reviewer: Annotated[Optional[str], typer.Option(help="Reviewer; without one the case stays unverified")] = None,
    file: Annotated[Optional[Path], typer.Option("--file", help="Golden file to append to "
                                                 "(default: the project's golden file)")] = None,
) -> None:
    """Turn a production wrong-answer report into a golden case: question + corrected SQL →
    frozen expected result, appended to the project's golden file."""
    proj = project()
    difficulties = proj.difficulties
    difficulty = difficulty or (difficulties[1] if len(difficulties) > 1 else difficulties[0])
    if difficulty not in difficulties:
        fail(f"--difficulty {difficulty!r} is not in the project's taxonomy {list(difficulties)}")
    pinned_id, manifest, serving = pinned()
    target = file or proj.default_golden_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        case = add_case(target, question=question, sql=sql, difficulty=difficulty, band=band,
                        cluster=cluster or proj.spec.taxonomy.default_cluster, serving=serving,
                        snapshot_id=pinned_id, as_of=manifest.as_of, split=split,
                        order_matters=order_matters,
                        traps=[t.strip() for t in traps.split(",")] if traps else None,
                        case_id=case_id, source=source, author=author, reviewer=reviewer,
                        policy=project_policy(proj, manifest))
    except Exception as exc:  # GrowthError, FreezeError, GoldenError: all name what to fix
        fail(f"{type(exc).__name__}: {exc}" if not isinstance(exc, GrowthError) else str(exc))
    rows = len(case.expected.rows) if case.expected else 0
    console.print(f"added [bold]{case.id}[/] ({case.status}) to {target}: "
                  + (f"{rows} expected row(s) frozen on {pinned_id}" if case.expected else
                     "no reference SQL yet: it runs with an execution-only score until reviewed"))


def _unservable(proj) -> dict[str, str]:
    """Why each model the snapshot does not serve is absent (for the import's refusals)."""
    selection = dbt.served_selection(proj)
    skipped = {line.split(":", 1)[0]: line for line in selection.skipped}
    rows = [(r.schema, r.name, "ephemeral" if "ephemeral" in skipped.get(r.unique_id, "")
             else "sensitive" if "sensitive schema" in skipped.get(r.unique_id, "") else "unselected")
            for r in selection.unserved]
    return unservable_reasons(rows, proj.spec.sensitive_schemas)


@golden_app.command("import")
def golden_import(
    path: Annotated[Path, typer.Argument(help="Question file: CSV/JSONL (id, question, sql, "
                                         "answerable, tags, …), defog CSV, Spider or BIRD JSON")],
    fmt: Annotated[Optional[str], typer.Option("--format", help="csv, jsonl, defog, spider or bird "
                                               "(default: from the file)")] = None,
    dialect: Annotated[Optional[str], typer.Option(help="SQL dialect of the file (snowflake, "
                                                   "bigquery, postgres, sqlite, …): transpiled to DuckDB")] = None,
    file: Annotated[Optional[Path], typer.Option("--file", help="Golden file to add the cases to "
                                                 "(default: the project's golden file)")] = None,
    difficulty: Annotated[Optional[str], typer.Option(help="Difficulty of rows that give none")] = None,
    cluster: Annotated[Optional[str], typer.Option(help="Cluster of rows that give none")] = None,
    split: Annotated[str, typer.Option(help="Split of rows that give none")] = "dev",
    id_prefix: Annotated[Optional[str], typer.Option(help="Prefix of generated ids")] = None,
    reviewer: Annotated[Optional[str], typer.Option(help="Reviewer; without one imported cases "
                                                    "stay unverified")] = None,
    author: Annotated[str, typer.Option(help="Who wrote the reference SQL")] = "import",
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Also write the import "
                                                     "report (accepted, rejected with reasons, "
                                                     "warnings, inferred) as JSON here")] = None,
) -> None:
    """Import questions into the golden set: every SQL is transpiled (with --dialect), checked
    by the guard's statement filter and frozen on the pinned snapshot; every rejected row is
    reported with its line and reason; nothing already in the golden set is changed."""
    proj = project()
    if not path.exists():
        fail(f"{path}: no such file")
    difficulties = proj.difficulties
    default_difficulty = difficulty or (difficulties[1] if len(difficulties) > 1 else difficulties[0])
    if default_difficulty not in difficulties:
        fail(f"--difficulty {default_difficulty!r} is not in the project's taxonomy {list(difficulties)}")
    pinned_id, manifest, serving = pinned()

    try:
        batch = read_questions(path, fmt, dialect, schema=schema_from_manifest(manifest))
    except SqlevalError as exc:
        fail(str(exc))
    target = file or proj.default_golden_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        report = import_rows(batch, golden_file=target, serving=serving, snapshot_id=pinned_id,
                             as_of=manifest.as_of, policy=project_policy(proj, manifest),
                             difficulties=difficulties, default_difficulty=default_difficulty,
                             default_cluster=cluster or proj.spec.taxonomy.default_cluster,
                             default_split=split, id_prefix=id_prefix, reviewer=reviewer,
                             author=author, unservable=_unservable(proj))
    except SqlevalError as exc:  # GoldenError, ImportAborted, SnapshotError, InputError ...
        fail(f"{exc}\n(nothing was written to {target})")
    t = Table(title=f"import of {path.name} ({batch.format}) into {target}")
    for col in ("line", "case", "result"):
        t.add_column(col)
    for c in report.accepted:
        rows = len(c.expected.rows) if c.expected else 0
        t.add_row(c.provenance.source.rsplit(":", 1)[-1], c.id, f"[green]{c.status}[/], {rows} row(s) frozen" if c.expected
                  else f"[green]{c.status}[/] ({c.band})")

    for r in report.rejected:
        t.add_row(str(r.line), r.id or "-", f"[red]rejected[/]: {escape(r.reason)}")
    console.print(t)
    for w in report.warnings:
        err.print(f"[yellow]warning:[/] {w}", highlight=False)
    for line in report.inferred_summary():
        console.print(f"inferred: {escape(line)}", highlight=False)
    rewritten = sum(1 for c in report.accepted if c.notes and "\nrewrite " in f"\n{c.notes}")
    if rewritten:
        console.print(f"{rewritten} case(s) needed a dialect rewrite to keep their {batch.dialect} "
                      "meaning (each rewrite is in the case's notes; docs/dialects.md)", highlight=False)
    note = report.execution_only_note()
    if note:
        console.print(f"[yellow]{escape(note)}[/]", highlight=False)
    if json_out is not None:
        write_atomically(json_out, (json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
                                    + "\n").encode("utf-8"))
        console.print(f"import report written to {json_out}")
    console.print(f"{len(report.accepted)} case(s) added, {len(report.rejected)} row(s) rejected"
                  f"; {target} keeps every case it had")
    if report.rejected and not report.accepted:
        raise typer.Exit(1)


@golden_app.command("stats")
def golden_stats(golden: GoldenPath = None,
                 as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Counts per difficulty × band × split."""
    gs = load_golden_or_fail(_golden(golden))
    if as_json:
        data = [{"difficulty": d, "band": b, "split": s, "cases": n}
                for (d, b, s), n in sorted(counts(gs.cases).items())]
        console.print_json(json.dumps(data))
        return
    t = Table(title=f"golden set: {len(gs)} cases ({', '.join(gs.domains())}); cells are dev/heldout")
    for h in STATS_HEADER:
        t.add_column(h, justify="right" if h != "difficulty" else "left")
    for row in stats_rows(gs.cases, project().difficulties):
        t.add_row(*row)
    console.print(t)


@golden_app.command("propose")
def golden_propose(
    n: Annotated[int, typer.Option("-n", "--count", min=1, max=500,
                                   help="How many proposals to add")] = 10,
    config: Annotated[Optional[Path], typer.Option("-c", "--config", help="A model "
                      "configuration (anthropic, openai): its model writes each question; "
                      "without one, or with another kind, the templates' questions are kept")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the choice among the drafts (same seed, "
                                      "same golden set and snapshot: same proposals)")] = 0,
    file: Annotated[Optional[Path], typer.Option("--file", help="Golden file the proposals are "
                                                 "added to (default: <golden>/proposed.jsonl)")] = None,
    max_rows: Annotated[int, typer.Option(help="Drop a query returning more rows")] = 50,
) -> None:
    """Propose new cases SQL-first: queries written from the served schema and the project's
    semantic definitions, run through the guard, described as questions, added with status
    generated (execution-only until `sqleval golden review` accepts them)."""
    proj = project()
    pinned_id, manifest, serving = pinned()
    target = file or proj.golden_dir / "proposed.jsonl"
    existing = list(load_golden_or_fail(proj.golden_dir).cases) if proj.golden_dir.exists() else []
    in_set = proj.golden_dir.exists() and target.resolve().parent == proj.golden_dir.resolve()
    if target.exists() and not in_set:
        existing += load_golden_or_fail(target).cases
    try:
        rejected = rejected_records(proj.golden_dir) if proj.golden_dir.exists() else []
        if not in_set:
            rejected += read_rejected(rejected_path(target))
    except SqlevalError as exc:
        fail(str(exc))
    writer, proposer = _question_writer(config, proj)

    try:
        glossary = project_glossary(proj)
    except GlossaryError as exc:
        fail(str(exc))
    catalog = load_catalog(serving, manifest.as_of, models_dir=proj.models_dir,
                           schema=manifest.serving_schema)
    vocab = vocabulary(catalog, glossary)
    before = target.read_bytes() if target.exists() else None
    with GuardedExecutor(serving, as_of=manifest.as_of, policy=project_policy(proj, manifest)) \
            as guard, console.status(f"proposing {n} case(s) on {pinned_id} …"):
        report = propose(
            n, vocab=vocab, execute=lambda sql: guard.execute(sql, limit=max_rows + 1),
            as_of=manifest.as_of, seed=seed, existing=existing, rejected=rejected,
            difficulties=proj.difficulties, clusters=proj.taxonomy["clusters"],
            default_cluster=proj.spec.taxonomy.default_cluster, proposer=proposer,
            writer=writer, schema_of=lambda t: catalog.render(curated=True, only=[t]),
            max_rows=max_rows, snapshot_id=pinned_id)
    if writer is not None:
        writer.close()
        for f in writer.failures[:3]:
            err.print(f"[yellow]warning:[/] the model did not answer ({f}); the template's "
                      "question was kept", highlight=False)

    try:
        append_proposals(target, before, [p.case for p in report.proposals])
    except GoldenChanged as exc:
        fail(str(exc))
    t = Table(title=f"{len(report.proposals)} proposal(s) added to {target} (status generated)")
    for col in ("case", "difficulty", "cluster", "rows", "question"):
        t.add_column(col)

    for p in report.proposals:
        t.add_row(p.case.id, p.case.difficulty, p.case.cluster, str(len(p.preview.rows)),
                  escape(p.case.question))
    console.print(t)
    dropped = ", ".join(f"{why}: {k}" for why, k in report.dropped.most_common())
    console.print(f"{report.tried} queries run through the guard in {report.seconds:.1f} s"
                  + (f"; dropped {dropped}" if dropped else ""), highlight=False)
    if len(report.proposals) < n:
        err.print(f"[yellow]only {len(report.proposals)} new proposal(s) found[/] (the rest "
                  "are in the golden set, were rejected, or make poor answers)")
    console.print("next: `sqleval golden review` to accept, edit or reject them; until then "
                  "they get an execution-only score and count in no accuracy")


def _question_writer(config: Path | None, proj):
    """(writer, proposer name): a model writer for anthropic/openai configurations, else none."""
    if config is None:
        return None, "template"

    try:
        writer = model_writer(load_config(config, project=proj))
    except (ConfigError, ProviderError) as exc:
        fail(str(exc))
    if writer is None:
        console.print(f"{config.name} is not a model configuration: the templates write the "
                      "questions")
        return None, "template"
    return writer, f"template+{writer.name}"


@golden_app.command("review")
def golden_review(
    reviewer: Annotated[Optional[str], typer.Option(envvar="SQLEVAL_REVIEWER", help="Who reviews "
                                                    "(default: the login name)")] = None,
    files: Annotated[Optional[list[Path]], typer.Option("--file", help="Golden file to review "
                                                        "(repeatable; default: every one)")] = None,
) -> None:
    """Review unverified and generated cases one by one: accept (freeze, verified), edit,
    reject with a reason, skip or quit. Each decision is saved at once; run it again to go on."""
    proj = project()
    pinned_id, manifest, serving = pinned()
    golden = golden_files(proj.golden_dir) if proj.golden_dir.exists() else []
    targets = [f.resolve() for f in files] if files else golden
    missing = [str(f) for f in targets if not f.exists()]
    if missing:
        fail(f"no such golden file: {', '.join(missing)}")
    if not targets:
        fail(f"no golden file in {proj.golden_dir}: add cases with `sqleval golden propose`, "
             "`import` or `add` first")
    for f in dict.fromkeys([*golden, *targets]):
        load_golden_or_fail(f)
    who = reviewer or getpass.getuser()
    with GuardedExecutor(serving, as_of=manifest.as_of, policy=project_policy(proj, manifest),
                         pool_size=1) as guard:
        ctx = ReviewContext(files=targets, golden=golden, guard=guard, serving=serving,
                            snapshot_id=pinned_id, as_of=manifest.as_of, reviewer=who,
                            difficulties=proj.difficulties, clusters=proj.taxonomy["clusters"])
        try:
            review(ctx, lambda prompt: console.input(escape(prompt)), console)
        except KeyboardInterrupt:
            console.print("\ninterrupted: every decision so far is saved; `sqleval golden "
                          "review` goes on at the next undecided case")
            raise typer.Exit(130) from None
