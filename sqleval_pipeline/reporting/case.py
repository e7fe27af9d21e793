"""Rich rendering of one case as evaluated in one batch (:class:`~sqleval_pipeline.pipeline.casefile.CaseDetail`).

Questions, SQL, column names and cell values come from the golden set, the system under test
and the data: they are always built into :class:`~rich.text.Text` (or highlighted by
:class:`~rich.syntax.Syntax`), never parsed as rich markup, so ``[bold]`` in a question prints
as those characters.

>>> import io
>>> from rich.console import Console
>>> from sqleval_pipeline.pipeline.casefile import Rows
>>> c = Console(width=60, file=io.StringIO(), record=True)
>>> c.print(rows_table(Rows(columns=["[b]x[/b]"], types=["VARCHAR"], rows=[["[red]y"]],
...                           total_rows=3)))
>>> out = c.export_text()
>>> "[b]x[/b]" in out and "[red]y" in out and "1 of 3 rows" in out
True
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from sqleval_pipeline.pipeline.casefile import CaseDetail, ExecutionDetail, Rows, RunDetail

#: longest cell shown in a result table; longer values end in an ellipsis
CELL_WIDTH = 40

_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
            "UINTEGER", "UBIGINT", "DECIMAL", "NUMERIC", "DOUBLE", "FLOAT", "REAL")
_OUTCOME_STYLE = {
    "CORRECT": "bold green", "CORRECT_FACTS": "green", "DEFERRED_CORRECTLY": "green",
    "WRONG": "bold red", "DEFERRED_WRONGLY": "red", "ERROR": "yellow",
}


def cell_text(value: Any, width: int = CELL_WIDTH) -> Text:
    """One JSON-encoded value as plain text (NULL dimmed), cut to ``width`` characters."""
    if value is None:
        return Text("NULL", style="dim")
    s = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    s = s.replace("\n", "⏎")
    return Text(s if len(s) <= width else s[: width - 1] + "…")


def rows_table(rows: Rows) -> Table:
    """A bounded result as a table; the caption says how many rows are shown of how many."""
    caption = f"{len(rows.rows)} of {rows.total_rows} rows" if rows.omitted else \
        f"{rows.total_rows} row{'s' if rows.total_rows != 1 else ''}"
    t = Table(caption=Text(caption), caption_justify="left")
    for name, typ in zip(rows.columns, rows.types, strict=True):
        numeric = typ.upper().startswith(_NUMERIC)
        t.add_column(Text.assemble(cell_text(name), ("\n" + typ, "dim")), overflow="fold",
                     justify="right" if numeric else "left")
    for row in rows.rows:
        t.add_row(*(cell_text(v) for v in row))
    return t


def sql_block(sql: str) -> Syntax:
    """SQL highlighted as SQL (the text is never read as markup)."""
    return Syntax(sql, "sql", word_wrap=True, background_color="default", theme="ansi_dark")


def _label(text: str) -> Text:
    return Text(text, style="bold")


def _field(label: str, value: str | None, style: str = "") -> Text:
    return Text.assemble((f"{label}: ", "bold"), (value or "-", style))


def _case_panel(d: CaseDetail) -> Panel:
    c = d.case
    meta = Text.assemble(
        ("band ", "dim"), c.band, ("  difficulty ", "dim"), c.difficulty, ("  split ", "dim"),
        c.split, ("  status ", "dim"), c.status, ("  cluster ", "dim"), c.cluster)
    parts: list[RenderableType] = [Text(c.question, style="bold"), meta]
    if c.traps:
        parts.append(_field("traps", ", ".join(c.traps)))
    if c.order_matters:
        parts.append(_field("order matters", ", ".join(c.order_keys) or "whole row order"))
    if c.notes:
        parts.append(_field("notes", c.notes, "italic"))
    return Panel(Group(*parts), title=Text(f"case {c.id}"), title_align="left")


def _reference(d: CaseDetail) -> list[RenderableType]:
    c = d.case
    out: list[RenderableType] = []
    if c.reference_sql:
        out += [_label("reference SQL"), sql_block(c.reference_sql)]
    elif c.band == "should_refuse":
        out.append(Text("should refuse: no reference SQL (the right answer is to decline)",
                        style="italic"))
    if c.expected is not None:
        out += [_label(f"expected result (frozen on {c.snapshot_id})"), rows_table(c.expected)]
    elif c.band != "should_refuse":
        out.append(Text("no frozen expected result: execution-only", style="yellow"))
    for i, (sql, alt) in enumerate(zip(c.alternative_sqls, c.alternatives, strict=False), 1):
        out += [_label(f"alternative {i} SQL"), sql_block(sql), _label(f"alternative {i} result"),
                rows_table(alt)]
    return out


def _batch_line(d: CaseDetail) -> Text:
    b = d.batch
    counts = ", ".join(f"{k} {v}" for k, v in d.outcomes.items() if v) or "not graded"
    return Text.assemble(
        (d.partition_key, "bold"), f"  batch {b.batch_id} ({b.status}, snapshot {b.snapshot_id}, "
        f"{b.runs} runs of {b.cases} cases)  ", ("outcomes: ", "bold"), counts)


def _execution(e: ExecutionDetail) -> list[RenderableType]:
    took = f" in {e.elapsed_ms:.1f} ms" if e.elapsed_ms is not None else ""
    if e.status == "ok" and e.result is not None:
        head = Text.assemble(("execution: ", "bold"), ("ok", "green"), took)
        if e.capped:
            head.append("  (cut by the result cap)", style="yellow")
        return [head, rows_table(e.result)]
    if e.status == "refused":
        return [Text.assemble(("execution: ", "bold"), ("refused by the guard", "red"),
                              f" (layer {e.layer}, reason {e.reason})"),
                Text(e.message or "", style="red")]
    if e.status == "timeout":
        return [Text.assemble(("execution: ", "bold"), ("timeout", "red"), took,
                              f" — {e.message or 'execution time cap reached'}")]
    return [Text.assemble(("execution: ", "bold"), (f"error ({e.error_source})", "red"),
                          f" {e.error_code or ''}"), Text(e.error_message or "", style="red")]


def _run_panel(r: RunDetail) -> Panel:
    a = r.answer
    parts: list[RenderableType] = []
    if a.kind == "sql" and a.sql:
        parts += [_label("SQL"), sql_block(a.sql)]
    elif a.kind == "refusal":
        parts.append(_field("declined", a.refusal_reason or "(no reason given)", "yellow"))
    else:
        parts.append(_field(f"no answer ({a.error_code})", a.error_message, "yellow"))
    if r.execution is not None:
        if r.execution.executed_sql:
            parts += [_label("executed as (DuckDB)"), sql_block(r.execution.executed_sql)]
        parts += _execution(r.execution)
    g = r.grade
    if g is None:
        parts.append(Text("not graded yet", style="dim"))
    else:
        parts.append(Text.assemble(("grade: ", "bold"),
                                   (g.outcome or "no outcome (execution only)",
                                    _OUTCOME_STYLE.get(g.outcome or "", "")),
                                   f"  ({g.reason})"))
        if g.mismatch:
            parts.append(_field("mismatch", g.mismatch))
        parts += _suite(g)
    for dg in r.diagnoses:
        parts.append(Text.assemble(("diagnosis ", "bold"), (f"({dg.judge}): ", "bold"),
                                   (dg.category, "magenta"), " — ", dg.explanation))
    outcome = "not graded" if g is None else g.outcome or "execution only"
    title = Text.assemble(f"run {r.run_index} · ", (outcome, _OUTCOME_STYLE.get(outcome, "")))
    border = "dim" if g is None or g.outcome is None else "yellow" if g.outcome == "ERROR" else \
        "green" if g.success else "red"
    return Panel(Group(*parts), title=title, title_align="left", border_style=border)


def _suite(g) -> list[RenderableType]:
    """The test suite's check of a run right on the snapshot (docs/test-suite.md)."""
    d = g.suite_detail or {}
    if g.suite_check == "accidental_match":
        out: list[RenderableType] = [_field("test suite", f"right on the snapshot ({g.snapshot_outcome}), wrong on "
                                            f"neighbour {d.get('neighbour')} ({d.get('kind')})", "red")]
        for label in ("missing", "unexpected"):
            rows = d.get(label) or []
            if rows:
                out.append(_field(f"  {label} there", "; ".join(
                    "(" + ", ".join(str(v) for v in r) + ")" for r in rows)))
        return out
    if g.suite_check == "inconclusive":
        why = [s[1] for s in d.get("skipped", [])][:1]
        return [_field("test suite", "inconclusive" + (f": {why[0]}" if why else ""), "dim")]
    if g.suite_check:
        return [_field("test suite", g.suite_check.replace("_", " "), "dim")]
    return []


def render_case(d: CaseDetail, console: Console | None = None) -> None:
    """Print a case, its reference and expected result, and every run of it in the batch."""
    console = console or Console()
    console.print(_case_panel(d))
    for part in _reference(d):
        console.print(part)
    console.print(_batch_line(d))
    for note in d.notes:
        console.print(Text.assemble(("note: ", "yellow"), note))
    for r in d.runs:
        console.print(_run_panel(r))


__all__ = ["CELL_WIDTH", "cell_text", "render_case", "rows_table", "sql_block"]
