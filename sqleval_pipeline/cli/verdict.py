"""The verdict of an evaluated batch: what ``sqleval run`` prints first (and alone with
``--quiet``), and the object ``--json`` prints (docs/command-line.md).

Everything is read from what the stages stored for the batch (``scorecard.json``,
``comparisons.json`` or ``gate.json``/``diff.json``, ``report.html``); nothing is recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.reporting.status import (  # noqa: F401 (re-exported: the verdict's vocabulary)
    FAILED, INCONCLUSIVE, NOT_GATED, PASSED, gate_status, newly_failing)

#: newly failing case ids listed in the verdict block before "and N more"
SHOWN_CASES = 10
_STYLE = {PASSED: "bold green", FAILED: "bold red", NOT_GATED: "yellow", INCONCLUSIVE: "bold yellow"}
_LABEL = {PASSED: "PASSED", FAILED: "FAILED", NOT_GATED: "not gated", INCONCLUSIVE: "INCONCLUSIVE"}


@dataclass
class Verdict:
    partition: str
    config_version: str
    batch_id: str
    gate: str  # PASSED, FAILED, NOT_GATED or INCONCLUSIVE
    gate_summary: str
    level: float
    accuracy: Any  # scoring.scorecard.Rate
    strict_accuracy: Any
    newly_failing: list[str] = field(default_factory=list)
    report: Path | None = None
    markdown: Path | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``sqleval run --json`` object (docs/command-line.md)."""
        return {
            "partition": self.partition,
            "config_version": self.config_version,
            "batch_id": self.batch_id,
            "gate": self.gate.replace(" ", "_"),
            "gate_summary": self.gate_summary,
            "accuracy": _rate_json(self.accuracy, self.level),
            "strict_accuracy": _rate_json(self.strict_accuracy, self.level),
            "newly_failing": list(self.newly_failing),
            "report": str(self.report) if self.report else None,
            "markdown_report": str(self.markdown) if self.markdown else None,
        }


def _rate_json(rate, level: float) -> dict[str, Any]:
    ci = rate.ci
    has_ci = ci is not None and ci.low is not None and ci.high is not None
    return {"value": rate.value, "numerator": rate.num, "denominator": rate.den,
            "level": level if has_ci else None,
            "low": ci.low if has_ci else None, "high": ci.high if has_ci else None,
            "method": ci.method if has_ci else None}


def build_verdict(card, batch, folder: Path, *, report=None, gate=None, diff=None,
                  markdown: Path | None = None) -> Verdict:
    status, summary = gate_status(card, report, gate)
    html = folder / bf.REPORT
    return Verdict(partition=batch.partition_key, config_version=card.config_version,
                   batch_id=batch.batch_id, gate=status, gate_summary=summary,
                   level=card.bootstrap.level, accuracy=card.overall.accuracy,
                   strict_accuracy=card.overall.strict_accuracy,
                   newly_failing=newly_failing(report, diff),
                   report=html if html.exists() else None, markdown=markdown)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def rate_line(rate, level: float) -> str:
    """``54.2% (96/177), 95% interval 40.7–77.4%, method: <method>``"""
    if rate.value is None:
        return f"n/a ({rate.num}/{rate.den})"
    out = f"{_pct(rate.value)} ({rate.num}/{rate.den})"
    ci = rate.ci
    if ci is not None and ci.low is not None and ci.high is not None:
        out += (f", {round(100 * level)}% interval {100 * ci.low:.1f}–{100 * ci.high:.1f}%, "
                f"method: {ci.method}")
    else:
        out += ", no interval"
    return out


def render_verdict(v: Verdict, console: Console) -> None:
    """The block ``sqleval run`` opens with."""
    style = _STYLE[v.gate]
    console.print(f"[bold]verdict[/] for {escape(v.partition)}, batch {escape(v.batch_id)}: "
                  f"gate [{style}]{_LABEL[v.gate]}[/]", highlight=False)
    console.print(f"  gate: {escape(v.gate_summary)}", highlight=False)
    console.print(f"  accuracy: {escape(rate_line(v.accuracy, v.level))}", highlight=False)
    console.print(f"  strict accuracy: {escape(rate_line(v.strict_accuracy, v.level))}",
                  highlight=False)
    shown = v.newly_failing[:SHOWN_CASES]
    more = len(v.newly_failing) - len(shown)
    cases = ", ".join(shown) + (f" and {more} more" if more > 0 else "") if shown else "none"
    console.print(f"  newly failing ({len(v.newly_failing)}): {escape(cases)}", highlight=False)
    if v.report is not None:
        console.print(f"  report: {escape(str(v.report))}", highlight=False)
