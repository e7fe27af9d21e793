"""One evaluated batch as the CI renderings read it (docs/ci.md): the JUnit XML file, the
GitHub annotations and the pull-request summary of ``sqleval run``.

:func:`load_batch_results` reads what the stages stored in a batch folder — ``batch.json``,
``scorecard.json``, ``comparisons.json`` (with ``diff.json``/``gate.json`` of each comparison),
the grades, answers, guarded executions and diagnoses — and the scorecards of the batches it
was compared with. Nothing is recomputed. :func:`golden_locations` gives each golden case's
file and line. The renderers (:mod:`~sqleval_pipeline.reporting.junit`,
:mod:`~sqleval_pipeline.reporting.annotations`, :mod:`~sqleval_pipeline.reporting.pr_summary`)
are pure functions of a :class:`BatchResults`.

How a case's runs make one verdict (:attr:`CaseView.verdict`), as the diff pairs cases: ERROR
runs (no answer: a provider outage, a harness fault) leave the count; the case *passes* when
more than half of its other runs succeeded (CORRECT, CORRECT_FACTS, or DEFERRED_CORRECTLY on a
should-refuse case) and *fails* otherwise; with every run ERROR it is an *error*; with no
graded run at all (no frozen expected result) it is *ungraded*.

>>> r = lambda i, o: RunView(run_index=i, outcome=o, reason="x")
>>> CaseView("q1", "answerable", [r(0, "WRONG"), r(1, "CORRECT"), r(2, "ERROR")]).verdict
'fails'
>>> CaseView("q1", "answerable", [r(0, "CORRECT"), r(1, "CORRECT"), r(2, "WRONG")]).verdict
'passes'
>>> CaseView("q1", "answerable", [r(0, "ERROR"), r(1, "ERROR")]).verdict
'error'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ValidationError

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.reporting.status import gate_status, newly_failing
from sqleval_pipeline.pipeline.comparisons import COMPARISONS_FILE, Comparison, GateReport
from sqleval_pipeline.errors import InputError
from sqleval_pipeline.golden.loader import golden_files, parse_lines
from sqleval_pipeline.pipeline.records import SUCCESS_OUTCOMES, Attempt, Diagnosis, Execution, Grade, load_records
from sqleval_pipeline.scoring.diff import Diff
from sqleval_pipeline.scoring.gate import GateResult
from sqleval_pipeline.scoring.scorecard import Scorecard
from sqleval_pipeline.pipeline.store import BatchInfo, read_batch_info
from sqleval_pipeline.textfiles import visible

#: how the comparisons are named for people
COMPARISON_LABEL = {"baseline": "declared baseline", "previous_version": "previous version",
                    "previous_batch": "previous batch"}
#: the aggregation rule, in one sentence (JUnit properties, docs/ci.md)
AGGREGATION_RULE = ("a case passes when more than half of its graded runs succeed (ERROR runs "
                    "are not counted); every run ERROR: error; no graded run: skipped")


# --------------------------------------------------------------------------- the views


@dataclass
class RunView:
    """One run of one case: the outcome, the grader's reason and mismatch, the answer, the
    guarded execution and every judge's diagnosis (``(judge, category, explanation)``)."""

    run_index: int
    outcome: str | None
    reason: str
    mismatch: str | None = None
    answer_kind: str | None = None  # sql | refusal | error
    sql: str | None = None
    refusal_reason: str | None = None
    answer_error: str | None = None  # "code: message" of an attempt without an answer
    execution_status: str | None = None  # ok | refused | timeout | error
    guard_layer: str | None = None
    guard_reason: str | None = None
    guard_message: str | None = None
    execution_error: str | None = None  # "source code: message"
    elapsed_ms: float | None = None
    diagnoses: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.outcome in SUCCESS_OUTCOMES

    @property
    def graded(self) -> bool:
        return self.outcome is not None and self.outcome != "ERROR"


@dataclass
class CaseView:
    """One case of the batch with its runs (ordered by run index) and where it is written."""

    case_id: str
    band: str
    runs: list[RunView]
    file: str | None = None  # the golden file, relative to the root given to golden_locations
    line: int | None = None  # its line there (from 1)

    @property
    def graded_runs(self) -> list[RunView]:
        return [r for r in self.runs if r.graded]

    @property
    def failing_runs(self) -> list[RunView]:
        return [r for r in self.runs if r.graded and not r.success]

    @property
    def verdict(self) -> str:
        """``passes``, ``fails``, ``error`` (every run ERROR) or ``ungraded`` (module doc)."""
        graded = self.graded_runs
        if graded:
            return "passes" if 2 * sum(r.success for r in graded) > len(graded) else "fails"
        return "error" if any(r.outcome == "ERROR" for r in self.runs) else "ungraded"

    @property
    def flips(self) -> bool:
        return len({r.outcome for r in self.graded_runs}) > 1

    @property
    def seconds(self) -> float:
        return sum(r.elapsed_ms or 0.0 for r in self.runs) / 1000


@dataclass
class ComparisonView:
    """One comparison of the gate, with its paired diff and the other side's scorecard when
    they were stored."""

    comparison: Comparison
    diff: Diff | None = None
    baseline_card: Scorecard | None = None

    @property
    def label(self) -> str:
        return COMPARISON_LABEL.get(self.comparison.kind, self.comparison.kind)


@dataclass
class BatchResults:
    """Everything the CI renderings show of one batch."""

    folder: Path
    batch: BatchInfo
    card: Scorecard
    report: GateReport | None
    gate: GateResult | None  # the declared baseline's gate (a batch without comparisons.json)
    diff: Diff | None
    comparisons: list[ComparisonView]
    cases: list[CaseView]
    status: str  # reporting.status: passed, failed, not gated, inconclusive
    gate_summary: str
    newly_failing: list[str]
    report_html: Path | None = None
    #: ``cases`` by id (the list it was made of and its length: made again when either changes)
    _case_index: tuple[list[CaseView], int, dict[str, CaseView]] | None = field(
        default=None, init=False, repr=False, compare=False)

    @property
    def partition_key(self) -> str:
        return self.batch.partition_key

    def case(self, case_id: str) -> CaseView | None:
        """The case's view (the first, should a case appear twice); found through an index of
        ``cases`` made on first use, so a renderer asking for every newly failing case of a
        large batch does not scan the list for each."""
        index = self._case_index
        if index is None or index[0] is not self.cases or index[1] != len(self.cases):
            by_id: dict[str, CaseView] = {}
            for c in self.cases:
                by_id.setdefault(c.case_id, c)
            index = self._case_index = (self.cases, len(self.cases), by_id)
        return index[2].get(case_id)

    def newly_failing_in(self, case_id: str) -> list[ComparisonView]:
        """The comparisons (made, not skipped) in which the case is newly failing."""
        return [v for v in self.comparisons
                if v.comparison.status != "skipped" and case_id in v.comparison.newly_failing]


# --------------------------------------------------------------------------- reading


def _read_model(path: Path, model: type[BaseModel]):
    try:
        return model.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: not a readable {model.__name__} ({first}); run the "
                         "configuration again with `sqleval run`") from None


def _optional_model(path: Path, model: type[BaseModel]):
    """The model in ``path``, or None when it is absent or unreadable (extra information)."""
    if not path.exists():
        return None
    try:
        return _read_model(path, model)
    except InputError:
        return None


def _records(folder: Path, name: str, model) -> list:
    for p in (folder / name, (folder / name).with_suffix(".jsonl")):
        if p.exists():
            return load_records(p, model)
    return []


def _baseline_card(folder: Path, c: Comparison) -> Scorecard | None:
    """The other side's scorecard: re-graded into this batch's folder when the grader changed,
    else where its own batch stored it (``runs/<version>/<batch>/``)."""
    if not (c.baseline_partition and c.baseline_batch):
        return None
    for p in (folder / "rebased" / c.baseline_partition / c.baseline_batch / bf.SCORECARD,
              folder.parent.parent / c.baseline_partition / c.baseline_batch / bf.SCORECARD):
        if p.exists():
            try:
                return Scorecard.load(p)
            except InputError:
                return None
    return None


def load_batch_results(folder: Path, locations: dict[str, tuple[str, int]] | None = None) -> BatchResults:
    """The stored results of the batch in ``folder`` (``<store>/runs/<version>/<batch>``).
    ``locations``: case id -> (golden file, line), from :func:`golden_locations`.

    Raises :class:`~sqleval_pipeline.errors.InputError` naming the file when the batch
    description, its scorecard or its comparisons cannot be read."""
    folder = Path(folder)
    batch = read_batch_info(folder / bf.BATCH)
    card_path = folder / bf.SCORECARD
    if not card_path.exists():
        raise InputError(f"{card_path} is missing: the batch has no scorecard yet; finish it "
                         "with `sqleval run`")
    card = Scorecard.load(card_path)
    report = (_read_model(folder / COMPARISONS_FILE, GateReport)
              if (folder / COMPARISONS_FILE).exists() else None)
    d = g = None  # as comparisons.baseline_diff_gate: only when the baseline comparison was made
    if report is not None and (folder / bf.GATE).exists() and report.comparisons \
            and report.comparisons[0].status != "skipped":
        d = _optional_model(folder / bf.DIFF, Diff)
        g = _optional_model(folder / bf.GATE, GateResult)
    views = []
    for c in report.comparisons if report is not None else []:
        sub = folder if c.kind == "baseline" else folder / c.kind
        views.append(ComparisonView(c, _optional_model(sub / bf.DIFF, Diff)
                                    if c.status != "skipped" else None, _baseline_card(folder, c)))
    status, summary = gate_status(card, report, g)
    html = folder / bf.REPORT
    return BatchResults(folder=folder, batch=batch, card=card, report=report, gate=g, diff=d,
                        comparisons=views, cases=_cases(folder, card, locations or {}),
                        status=status, gate_summary=summary,
                        newly_failing=newly_failing(report, d),
                        report_html=html if html.exists() else None)


def _cases(folder: Path, card: Scorecard, locations: dict[str, tuple[str, int]]) -> list[CaseView]:
    def keyed(records) -> dict[tuple[str, int], object]:
        return {(r.case_id, r.run_index): r for r in records}

    grades = keyed(_records(folder, bf.GRADES, Grade))
    attempts = keyed(_records(folder, bf.ATTEMPTS, Attempt))
    executions = keyed(_records(folder, bf.EXECUTIONS, Execution))
    diagnoses: dict[tuple[str, int], list[tuple[str, str, str]]] = {}
    for dg in sorted(_records(folder, bf.DIAGNOSES, Diagnosis), key=lambda x: x.judge):
        diagnoses.setdefault((dg.case_id, dg.run_index), []).append((dg.judge, dg.category, dg.explanation))
    out = []
    for c in card.cases:
        runs = []
        for i, outcome, reason in zip(c.runs, c.outcomes, c.reasons):
            key = (c.case_id, i)
            run = RunView(run_index=i, outcome=outcome, reason=reason,
                          diagnoses=diagnoses.get(key, []) if outcome not in SUCCESS_OUTCOMES else [])
            g, a, x = grades.get(key), attempts.get(key), executions.get(key)
            if g is not None:
                run.mismatch = g.mismatch
            if a is not None:
                run.answer_kind, run.sql, run.refusal_reason = a.kind, a.sql, a.refusal_reason
                if a.kind == "error":
                    run.answer_error = f"{a.error_code}: {a.error_message or ''}".rstrip(": ")
            if x is not None:
                run.execution_status, run.elapsed_ms = x.status, x.elapsed_ms
                run.guard_layer, run.guard_reason, run.guard_message = x.layer, x.reason, x.message
                if x.status in ("error", "timeout"):
                    run.execution_error = (f"{x.error_source or x.status} {x.error_code or ''}: "
                                           f"{x.error_message or x.message or ''}").strip()
            runs.append(run)
        file, line = locations.get(c.case_id, (None, None))
        out.append(CaseView(c.case_id, c.band, runs, file, line))
    return out


def golden_locations(golden_dir: Path, root: Path) -> dict[str, tuple[str, int]]:
    """case id -> (its golden file relative to ``root`` as a POSIX path, its line from 1),
    for every case of the golden files of ``golden_dir`` (a folder of ``*.jsonl`` or one file).
    A line that is not a valid case is passed over; an id written twice keeps its first line."""
    out: dict[str, tuple[str, int]] = {}
    for f in golden_files(Path(golden_dir)) if Path(golden_dir).exists() else []:
        shown = relative_path(f, root)
        cases, _problems = parse_lines(f, f.read_text(encoding="utf-8"))
        for line, case in cases:
            out.setdefault(case.id, (shown, line))
    return out


def relative_path(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` (POSIX separators), else absolute."""
    path = Path(path).resolve()
    try:
        return path.relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def annotation_root(project_root: Path, environ: dict[str, str] | None = None) -> Path:
    """Where the paths CI shows are relative to: the checkout a GitHub workflow runs in
    (``GITHUB_WORKSPACE``) or a GitLab job (``CI_PROJECT_DIR``) when the project is inside it,
    else the nearest folder above the project holding ``.git``, else the project's folder."""
    project_root = Path(project_root).resolve()
    for var in ("GITHUB_WORKSPACE", "CI_PROJECT_DIR"):
        value = (environ or {}).get(var)
        if value:
            ws = Path(value).resolve()
            if project_root == ws or ws in project_root.parents:
                return ws
    for folder in (project_root, *project_root.parents):
        if (folder / ".git").exists():
            return folder
    return project_root


# --------------------------------------------------------------------------- shared wording


def clip(text: str | None, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, saying how much was left out.

    >>> clip("abcdefghij", 10), clip("a" * 100, 30), clip("abcdefghij", 5)
    ('abcdefghij', 'aaaaaa … (94 more characters)', 'abcd…')
    """
    text = "" if text is None else str(text)
    if len(text) <= limit:
        return text
    keep = limit - len(f" … ({len(text)} more characters)")
    if keep < 1:
        return text[: max(0, limit - 1)] + "…"
    return f"{text[:keep]} … ({len(text) - keep} more characters)"


def one_line(text: str | None) -> str:
    """``text`` with every run of whitespace (line breaks included) made one space, and every
    control or invisible character written as its escape."""
    return " ".join(visible("" if text is None else str(text)).split())


def runs_text(case: CaseView) -> str:
    """``run 0 WRONG, run 1 CORRECT, run 2 WRONG``"""
    return ", ".join(f"run {r.run_index} {r.outcome or 'ungraded'}" for r in case.runs)


def diagnosis_text(case: CaseView) -> str:
    """The judges' categories of the failing runs: ``wrong_metric (rules), wrong_filter (llm:m)``."""
    seen = dict.fromkeys((cat, judge) for r in case.runs if not r.success for judge, cat, _ in r.diagnoses)
    return ", ".join(f"{cat} ({judge})" for cat, judge in seen)


def case_summary(case: CaseView, limit: int = 300) -> str:
    """One line on a case that does not pass: how many runs failed and how, the judges'
    categories and the first failing run's mismatch (or refusal, or error), each clipped."""
    verdict = case.verdict
    runs = case.runs
    if verdict == "error":
        first = next((r for r in runs if r.outcome == "ERROR"), None)
        why = (first.answer_error or first.execution_error or first.reason) if first else ""
        return one_line(f"no answer in any run ({runs_text(case)}): {clip(why, limit)}")
    if verdict == "ungraded":
        return one_line(f"not graded ({runs_text(case)}): no frozen expected result; review the "
                        "case to grade it")
    graded, failing = case.graded_runs, case.failing_runs
    head = f"{len(failing)} of {len(graded)} graded runs failed ({runs_text(case)})"
    parts = [head]
    diag = diagnosis_text(case)
    if diag:
        parts.append(f"diagnosis: {diag}")
    first = failing[0] if failing else None
    if first is not None:
        parts.append(f"{first.outcome}: {first_failure(first, limit)}")
    return one_line("; ".join(parts))


def first_failure(run: RunView, limit: int = 300) -> str:
    """Why one run failed, briefly: the mismatch, the refusal, the guard's refusal or the error."""
    if run.outcome == "DEFERRED_WRONGLY":
        return "refused an answerable question: " + clip(run.refusal_reason or run.reason, limit)
    if run.execution_status == "refused":
        return clip(f"the guard refused it ({run.guard_layer}: {run.guard_reason}): "
                    f"{run.guard_message or ''}", limit)
    if run.mismatch:
        return "mismatch: " + clip(run.mismatch, limit)
    if run.execution_error:
        return clip(run.execution_error, limit)
    return clip(run.reason, limit)


def run_details(run: RunView, limit: int = 2000) -> list[str]:
    """Every stored detail of one run, one item each, clipped to ``limit`` characters."""
    out = [f"run {run.run_index}: {run.outcome or 'ungraded'} ({run.reason})"]
    for judge, cat, why in run.diagnoses:
        out.append(f"  diagnosis ({judge}): {cat}: {clip(why, limit)}")
    if run.mismatch:
        out.append(f"  mismatch: {clip(run.mismatch, limit)}")
    if run.answer_kind == "refusal":
        out.append(f"  answer: refused: {clip(run.refusal_reason, limit)}")
    elif run.answer_kind == "error":
        out.append(f"  answer: none: {clip(run.answer_error, limit)}")
    elif run.sql is not None:
        out.append(f"  sql: {clip(run.sql, limit)}")
    if run.execution_status == "refused":
        out.append(f"  guard: refused by {run.guard_layer} ({run.guard_reason}): "
                   f"{clip(run.guard_message, limit)}")
    elif run.execution_error:
        out.append(f"  execution: {clip(run.execution_error, limit)}")
    return out
