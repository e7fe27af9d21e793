"""The review session of ``sqleval golden review``: a person decides on every ``unverified``
and ``generated`` case, one at a time, in a plain terminal (works over SSH).

Each case is shown with its question, metadata and SQL, the first rows its SQL returns on the
pinned snapshot (run through the guard) and the most similar cases already in the golden set
(or rejected before). The reviewer then:

* **accepts** it: the SQL must run through the guard; the expected result is frozen on the
  pinned snapshot (:func:`~sqleval_pipeline.golden.freeze.freeze_cases`), the status becomes
  ``verified`` and the reviewer and date go into its provenance;
* **edits** its question, SQL, difficulty, band, split, cluster or ``order_matters`` (a new
  SQL drops any result frozen for the old one), then decides;
* **rejects** it with a reason: it moves to the rejected ledger beside its golden file
  (:func:`~sqleval_pipeline.golden.dedup.rejected_path`), so it is never proposed again;
* **skips** it (it stays undecided for the next session) or **quits**.

Every decision and every edit is on disk before the next prompt: the golden file is rewritten
atomically with only that case's line changed (every other line byte for byte). A session
stopped at any moment (Ctrl-C, a closed terminal, ``kill -9``) loses nothing decided, and the
next one starts at the first undecided case. A rejection is written to the ledger first and
then removed from the golden file; a session stopped between the two finishes the removal
when the next one starts.

The session takes an ``ask(prompt) -> str`` function and a rich ``Console``: the command line
passes the terminal's, tests pass their own. ``ask`` raising ``EOFError`` ends the session
like *quit*; ``KeyboardInterrupt`` propagates to the caller once everything is saved.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sqleval_pipeline.golden.dedup import (
    append_rejected, normalise_sql, question_key, question_similarity, read_rejected,
    rejected_path, write_text_atomically,
)
from sqleval_pipeline.golden.freeze import MAX_REFERENCE_ROWS, FreezeError, freeze_cases
from sqleval_pipeline.golden.loader import load_golden
from sqleval_pipeline.golden.model import BANDS, SPLITS, Case

PENDING = ("unverified", "generated")
ROWS_SHOWN = 8
SIMILAR_SHOWN = 3
ACTIONS = "[a]ccept  [e]dit  [r]eject  [s]kip  [q]uit"
FIELDS = {"q": "question", "s": "sql", "d": "difficulty", "b": "band", "p": "split",
          "c": "cluster", "o": "order_matters"}


@dataclass
class ReviewContext:
    files: list[Path]
    #: every golden file (the set the similar cases come from)
    golden: list[Path]
    guard: object                # GuardedExecutor: execute(sql, limit=) -> GuardResult
    serving: Path
    snapshot_id: str
    as_of: dt.date
    reviewer: str
    difficulties: tuple[str, ...]
    clusters: tuple[str, ...] | None = None
    today: dt.date = field(default_factory=dt.date.today)


@dataclass
class ReviewSummary:
    accepted: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    remaining: int = 0
    quit: bool = False


# --------------------------------------------------------------------------- files


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def _line_id(line: str) -> str | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data.get("id") if isinstance(data, dict) else None


def replace_case(path: Path, case_id: str, case: Case | None) -> bool:
    """Rewrite ``path`` atomically with case ``case_id``'s line replaced by ``case`` (removed
    when None), every other line unchanged; False when the file no longer has that case."""
    lines = _lines(path)
    for i, line in enumerate(lines):
        if _line_id(line) == case_id:
            lines[i:i + 1] = [case.to_json_line() + "\n"] if case is not None else []
            write_text_atomically(path, "".join(lines))
            return True
    return False


def _revalidate(case: Case) -> Case:
    """``model_copy(update=…)`` skips validation: check the result like a loaded line."""
    return Case.model_validate(json.loads(case.to_json_line()))


# --------------------------------------------------------------------------- the session


class ReviewSession:
    def __init__(self, ctx: ReviewContext, ask: Callable[[str], str], console: Console):
        self.ctx = ctx
        self.ask = ask
        self.out = console
        self.summary = ReviewSummary()

    # -- loading ------------------------------------------------------------------------

    def _load(self, path: Path) -> list[Case]:
        if not path.exists():
            return []
        return load_golden(path, difficulties=self.ctx.difficulties,
                           clusters=self.ctx.clusters).cases

    def _paths(self) -> list[Path]:
        return list(dict.fromkeys(p.resolve() for p in [*self.ctx.golden, *self.ctx.files]))

    def _everything(self) -> list[Case]:
        return [c for p in self._paths() for c in self._load(p)]

    def _rejections(self) -> list[dict]:
        paths = {rejected_path(p) for p in self._paths()}
        return [r for p in sorted(paths) for r in read_rejected(p)]

    def _recover(self) -> None:
        """Finish rejections a stopped session wrote to the ledger but not yet to the file."""
        for path in self.ctx.files:
            ledger = {r["case"].get("id"): r["case"] for r in read_rejected(rejected_path(path))}
            for case in self._load(path):
                rec = ledger.get(case.id)
                if rec and rec.get("question") == case.question and \
                        rec.get("reference_sql") == case.reference_sql and \
                        replace_case(path, case.id, None):
                    self.summary.recovered.append(case.id)

    def pending(self) -> list[tuple[Path, str]]:
        return [(p, c.id) for p in self.ctx.files for c in self._load(p) if c.status in PENDING]

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> ReviewSummary:
        self._recover()
        if self.summary.recovered:
            self.out.print(f"finished the rejection of {', '.join(self.summary.recovered)} "
                           "(the last session stopped halfway)")
        queue = self.pending()
        self.out.print(f"{len(queue)} case(s) to review in "
                       f"{', '.join(p.name for p in self.ctx.files)}; reviewer "
                       f"{escape(self.ctx.reviewer)}; snapshot {self.ctx.snapshot_id}")
        for i, (path, case_id) in enumerate(queue, 1):
            case = next((c for c in self._load(path) if c.id == case_id), None)
            if case is None or case.status not in PENDING:
                continue  # decided meanwhile (another session, or by hand)
            try:
                if self._review(path, case, i, len(queue)) == "quit":
                    self.summary.quit = True
                    break
            except EOFError:
                self.summary.quit = True
                break
        self.summary.remaining = len(self.pending())
        s = self.summary
        self.out.print(f"accepted {len(s.accepted)}, edited {len(s.edited)}, rejected "
                       f"{len(s.rejected)}, skipped {len(s.skipped)}; {s.remaining} case(s) "
                       "still to review. Every decision is saved.")
        return s

    def _review(self, path: Path, case: Case, i: int, total: int) -> str:
        self._show(path, case, i, total)
        while True:
            choice = self.ask(f"{ACTIONS} > ").strip().lower()[:1]
            if choice == "a":
                if self._accept(path, case):
                    return "decided"
            elif choice == "e":
                edited = self._edit(path, case)
                if edited is not None:
                    case = edited
                    self._show(path, case, i, total)
            elif choice == "r":
                if self._reject(path, case):
                    return "decided"
            elif choice == "s":
                self.summary.skipped.append(case.id)
                self.out.print(f"skipped {case.id}")
                return "skipped"
            elif choice == "q":
                return "quit"
            else:
                self.out.print("type a, e, r, s or q")

    # -- showing ----------------------------------------------------------------------------

    def _run(self, sql: str):
        return self.ctx.guard.execute(sql, limit=MAX_REFERENCE_ROWS + 1)

    def _show(self, path: Path, case: Case, i: int, total: int) -> None:
        out = self.out
        out.rule(escape(f"[{i}/{total}] {case.id} — {case.status}, {path.name}"))
        out.print(f"[bold]question:[/] {escape(case.question)}")
        out.print(f"difficulty {case.difficulty} · band {case.band} · split {case.split} · "
                  f"cluster {escape(case.cluster)} · order matters {case.order_matters} · "
                  f"from {escape(case.provenance.source)} by {escape(case.provenance.author)}")
        if case.notes:
            out.print(f"[dim]notes: {escape(case.notes)}[/]")
        if not case.reference_sql:
            out.print("[yellow]no SQL[/]" + (" (should_refuse: nothing to run)"
                                              if not case.answerable else
                                              " — edit it to write one before accepting"))
        else:
            out.print(f"[bold]sql:[/] {escape(case.reference_sql)}")
            res = self._run(case.reference_sql)
            if not res.ok or res.result is None:
                out.print(f"[red]the guard stops it:[/] {escape(res.describe())}")
            else:
                rs = res.result
                more = len(rs.rows) > MAX_REFERENCE_ROWS
                out.print(f"{'more than ' + str(MAX_REFERENCE_ROWS) if more else len(rs.rows)} "
                          f"row(s) on {self.ctx.snapshot_id}"
                          + (f", the first {ROWS_SHOWN}:" if len(rs.rows) > ROWS_SHOWN else ":"))
                t = Table()
                for col in rs.columns:
                    t.add_column(escape(col))
                for row in rs.rows[:ROWS_SHOWN]:
                    t.add_row(*(escape("NULL" if v is None else str(v)) for v in row))
                out.print(t)
        self._show_similar(case)

    def _show_similar(self, case: Case) -> None:
        norm = normalise_sql(case.reference_sql)
        scored = []
        for other in self._everything():
            if other.id == case.id:
                continue
            same = norm is not None and norm in {normalise_sql(s) for s in
                                                 [other.reference_sql, *other.alternative_sqls]}
            score = question_similarity(case.question, other.question)
            if same or score >= 0.3:
                scored.append((not same, -score, other.id, other, same))
        for rec in self._rejections():
            other = rec["case"]
            score = question_similarity(case.question, str(other.get("question") or ""))
            same = norm is not None and normalise_sql(other.get("reference_sql")) == norm
            if same or score >= 0.5:
                why = (rec.get("rejected") or {}).get("reason", "")
                self.out.print(f"[yellow]rejected before:[/] {escape(str(other.get('id')))} "
                               f"({'same SQL' if same else f'{score:.0%} alike'}) "
                               f"{escape(str(other.get('question')))} — {escape(why)}")
        if not scored:
            self.out.print("[dim]no similar case in the golden set[/]")
            return
        for _, neg, _, other, same in sorted(scored, key=lambda x: x[:3])[:SIMILAR_SHOWN]:
            self.out.print(f"similar: {other.id} ({other.status}, "
                           f"{'same SQL' if same else f'{-neg:.0%} alike'}) "
                           f"{escape(other.question)}")

    # -- decisions ----------------------------------------------------------------------------

    def _accept(self, path: Path, case: Case) -> bool:
        if case.answerable and not case.reference_sql:
            self.out.print("[red]cannot accept:[/] an answerable case needs SQL — edit it (e), or "
                           "set its band to should_refuse")
            return False
        if case.answerable:
            res = self._run(case.reference_sql)
            if not res.ok:
                self.out.print(f"[red]cannot accept:[/] {escape(res.describe())} — edit the SQL "
                               "or reject the case")
                return False
        prov = case.provenance.model_copy(update={"reviewer": self.ctx.reviewer,
                                                  "date": self.ctx.today})
        try:
            verified = _revalidate(case.model_copy(update={"status": "verified",
                                                           "provenance": prov}))
            frozen = freeze_cases([verified], self.ctx.serving, self.ctx.snapshot_id,
                                  self.ctx.as_of)[0]
        except (FreezeError, ValidationError) as exc:
            self.out.print(f"[red]cannot accept:[/] {escape(str(exc))}")
            return False
        if not replace_case(path, case.id, frozen):
            self.out.print(f"[yellow]{case.id} is no longer in {path.name}; nothing written[/]")
            return True
        rows = len(frozen.expected.rows) if frozen.expected else 0
        self.summary.accepted.append(case.id)
        self.out.print(f"[green]accepted[/] {case.id}: verified by {escape(self.ctx.reviewer)}"
                       + (f", {rows} row(s) frozen on {self.ctx.snapshot_id}"
                          if frozen.expected else ""))
        return True

    def _reject(self, path: Path, case: Case) -> bool:
        reason = " ".join(self.ask("reason (required, kept with the case) > ").split())
        if not reason:
            self.out.print("not rejected: a reason is needed, so the next reviewer knows why")
            return False
        record = {"rejected": {"reason": reason, "reviewer": self.ctx.reviewer,
                               "date": self.ctx.today.isoformat()},
                  "case": json.loads(case.to_json_line())}
        append_rejected(rejected_path(path), record)
        replace_case(path, case.id, None)
        self.summary.rejected.append(case.id)
        self.out.print(f"[red]rejected[/] {case.id}: kept in "
                       f"{rejected_path(path).parent.name}/{path.name} with the reason")
        return True

    def _edit(self, path: Path, case: Case) -> Case | None:
        menu = "  ".join(v.replace(k, f"[{k}]", 1) for k, v in FIELDS.items())
        key = self.ask(f"edit which? {menu} (Enter: back) > ").strip().lower()[:1]
        name = FIELDS.get(key)
        if name is None:
            return None
        update = self._edit_value(case, name)
        if update is None:
            return None
        try:
            edited = _revalidate(case.model_copy(update=update))
        except ValidationError as exc:
            self.out.print("[red]not saved:[/] " + escape("; ".join(
                e["msg"].removeprefix("Value error, ") for e in exc.errors())))
            return None
        if not replace_case(path, case.id, edited):
            self.out.print(f"[yellow]{case.id} is no longer in {path.name}; nothing written[/]")
            return None
        if case.id not in self.summary.edited:
            self.summary.edited.append(case.id)
        self.out.print(f"saved {name} of {case.id}")
        return edited

    def _edit_value(self, case: Case, name: str) -> dict | None:
        if name == "sql":
            self.out.print(f"current SQL: {escape(case.reference_sql or '(none)')}")
            lines = []
            while True:
                line = self.ask("new SQL (end with an empty line; empty: keep) > " if not lines
                                else "… > ")
                if not line.strip():
                    break
                lines.append(line.rstrip())
            sql = "\n".join(lines).strip().rstrip(";").strip()
            if not sql or sql == case.reference_sql:
                return None
            verdict = self.ctx.guard.check(sql)
            if not verdict.allowed:
                self.out.print(f"[yellow]the guard's filter refuses it ({verdict.reason}): "
                               f"{escape(verdict.message or '')} — saved anyway; fix it before "
                               "accepting[/]")
            note = f"SQL edited in review by {self.ctx.reviewer} on {self.ctx.today}"
            prov = case.provenance.model_copy(update={"author": self.ctx.reviewer})
            return {"reference_sql": sql, "alternative_sqls": [], "expected": None,
                    "snapshot_id": None, "order_keys": [], "provenance": prov,
                    "notes": f"{case.notes}\n{note}" if case.notes else note}
        current = getattr(case, name)
        choices = {"difficulty": self.ctx.difficulties, "band": BANDS, "split": SPLITS,
                   "cluster": self.ctx.clusters, "order_matters": ("yes", "no")}.get(name)
        hint = f" ({', '.join(choices)})" if choices else ""
        value = self.ask(f"{name}{hint}, now {current!s} (empty: keep) > ").strip()
        if not value:
            return None
        if name == "question":
            return None if question_key(value) == question_key(case.question) else \
                {"question": value}
        if name == "order_matters":
            if value.lower() not in ("yes", "no", "y", "n", "true", "false"):
                self.out.print("answer yes or no")
                return None
            return {"order_matters": value.lower() in ("yes", "y", "true"), "order_keys": []}
        if choices and value not in choices:
            self.out.print(f"[red]not saved:[/] {escape(value)} is not one of {', '.join(choices)}")
            return None
        update: dict = {name: value}
        if name == "band" and value == "should_refuse":
            update.update(reference_sql=None, alternative_sqls=[], expected=None, order_keys=[])
            self.out.print("a should_refuse case has no SQL: the SQL is dropped")
        return update


def review(ctx: ReviewContext, ask: Callable[[str], str], console: Console) -> ReviewSummary:
    """Run one review session (see the module doc)."""
    return ReviewSession(ctx, ask, console).run()


__all__ = ["PENDING", "ReviewContext", "ReviewSession", "ReviewSummary", "replace_case", "review"]
