"""Markdown and rich renderings of a judge calibration report (the report itself is computed by
:mod:`sqleval_pipeline.judging.calibration`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from rich.table import Table

from sqleval_pipeline.judging.calibration import (
    CalibrationReport,
    JudgeCalibration,
    JudgePairDisagreement,
)
from sqleval_pipeline.pipeline.records import FAILURE_CATEGORIES, AttemptKey
from sqleval_pipeline.textfiles import visible_text

__all__ = ["calibration_markdown", "render_calibration"]


# --------------------------------------------------------------------------- rendering


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _kappa(j: JudgeCalibration | JudgePairDisagreement) -> str:
    if j.kappa is None:
        return "n/a"
    ci = getattr(j, "kappa_ci", None)
    return f"{j.kappa:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _key_text(k: AttemptKey) -> str:
    return f"{k.config_version}/{k.case_id}/run {k.run_index}"


def _summary_rows(report: CalibrationReport) -> list[list[str]]:
    return [
        [j.judge, ", ".join(j.judge_versions) or "-", str(j.n),
         f"{_pct(j.agreement_rate)} ({j.agreements}/{j.n})", _kappa(j), j.status,
         str(j.labelled_not_diagnosed)]
        for j in report.judges
    ]


_SUMMARY_HEADERS = ["judge", "version", "n", "agreement", "kappa [95% CI]", "status",
                    "labelled, not diagnosed"]


def _used_categories(j: JudgeCalibration) -> list[str]:
    return [c for c in FAILURE_CATEGORIES
            if any(j.confusion[c].values()) or any(j.confusion[h][c] for h in FAILURE_CATEGORIES)]


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    def esc(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(esc(h) for h in headers) + " |",
           "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(esc(v) for v in row) + " |" for row in rows]
    return out


@visible_text
def calibration_markdown(report: CalibrationReport) -> str:
    """The report as Markdown: summary, confusion tables, disagreements, human conflicts.

    >>> from sqleval_pipeline.judging.calibration import calibrate
    >>> r = calibrate({"rules": []}, [], config_name_of={})
    >>> "| rules | - | 0 | n/a (0/0) | n/a | uncalibrated (n < 20) | 0 |" in calibration_markdown(r)
    True
    """
    lines = ["## Judge calibration", "",
             f"{report.n_labelled_attempts} labelled attempt(s) from {report.n_labels} label(s) by "
             f"{len(report.labelers)} labeler(s); a judge is calibrated at n ≥ {report.min_n} "
             f"and kappa ≥ {report.min_kappa:.2f}. "
             "Categories from an uncalibrated judge are not to be trusted.", ""]
    lines += _md_table(_SUMMARY_HEADERS, _summary_rows(report))
    for j in report.judges:
        notes = [n for n in (j.kappa_note,) if n]
        if j.ambiguous:
            notes.append(f"{len(j.ambiguous)} label(s) match several config versions and were left out")
        used = _used_categories(j)
        lines += ["", f"### {j.judge}: human (rows) × judge (columns)"]
        if notes:
            lines += [""] + [f"- {n}" for n in notes]
        if not used:
            lines += ["", "_no labelled attempt diagnosed_"]
            continue
        lines += [""] + _md_table(["human \\ judge", *used],
                                  [[h, *(j.confusion[h][c] for c in used)] for h in used])
    for p in report.disagreements:
        lines += ["", f"### Disagreements: {p.judge_a} vs {p.judge_b}", "",
                  f"{p.n_both} attempt(s) diagnosed by both; agreement {_pct(p.agreement_rate)} "
                  f"({p.n_agree}/{p.n_both}), kappa {_kappa(p)}."]
        if p.rows:
            lines += [""] + _md_table(
                [p.judge_a, p.judge_b, "count", "examples"],
                [[r.judge_a_category, r.judge_b_category, r.count,
                  ", ".join(_key_text(k) for k in r.examples)] for r in p.rows])
    if report.human_conflicts:
        lines += ["", "### Human conflicts (left out)", ""]
        lines += _md_table(["attempt", "labels"], [
            [f"{c.attempt.config_name}/{c.attempt.case_id}/run {c.attempt.run_index}",
             ", ".join(f"{who}: {cat}" for who, cat in c.labels.items())]
            for c in report.human_conflicts])
    return "\n".join(lines) + "\n"


def render_calibration(report: CalibrationReport, console: Any) -> None:
    """Print the report on a :class:`rich.console.Console`.

    >>> import io
    >>> from rich.console import Console
    >>> from sqleval_pipeline.judging.calibration import calibrate
    >>> console = Console(record=True, width=140, file=io.StringIO())
    >>> render_calibration(calibrate({"rules": []}, [], config_name_of={}), console)
    >>> "uncalibrated (n < 20)" in console.export_text()
    True
    """
    summary = Table(title=f"Judge calibration ({report.n_labelled_attempts} labelled attempts, "
                          f"calibrated at n ≥ {report.min_n} and kappa ≥ {report.min_kappa:.2f})")
    for h in _SUMMARY_HEADERS:
        summary.add_column(h, justify="right" if h == "n" else "left")
    for j, row in zip(report.judges, _summary_rows(report), strict=True):
        style = None if j.calibrated else "yellow"
        summary.add_row(*row, style=style)
    console.print(summary)
    for j in report.judges:
        used = _used_categories(j)
        if not used:
            continue
        t = Table(title=f"{j.judge}: human (rows) × judge (columns)")
        t.add_column("human \\ judge")
        for c in used:
            t.add_column(c, justify="right")
        for h in used:
            t.add_row(h, *(str(j.confusion[h][c]) if h != c else f"[bold]{j.confusion[h][c]}[/bold]"
                           for c in used))
        console.print(t)
        if j.kappa_note:
            console.print(f"  {j.kappa_note}")
        if j.ambiguous:
            console.print(f"  {len(j.ambiguous)} label(s) match several config versions and were left out")
    for p in report.disagreements:
        t = Table(title=f"Disagreements: {p.judge_a} vs {p.judge_b} — {p.n_both} both diagnosed, "
                        f"agreement {_pct(p.agreement_rate)}, kappa {_kappa(p)}")
        t.add_column(p.judge_a)
        t.add_column(p.judge_b)
        t.add_column("count", justify="right")
        t.add_column("examples")
        for r in p.rows:
            t.add_row(r.judge_a_category, r.judge_b_category, str(r.count),
                      ", ".join(_key_text(k) for k in r.examples))
        console.print(t)
    if report.human_conflicts:
        console.print(f"{len(report.human_conflicts)} attempt(s) with conflicting human labels left out: "
                      + "; ".join(f"{c.attempt.config_name}/{c.attempt.case_id}/run {c.attempt.run_index}"
                                  for c in report.human_conflicts))
