"""Renderings of a batch's comparisons (baseline, previous version, previous batch) and of
what changed between the two sides of each."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sqleval_pipeline.pipeline.comparisons import GateReport
from sqleval_pipeline.reporting.scorecard import pct
from sqleval_pipeline.textfiles import visible_text

_STATUS = {"passed": "green", "waived": "yellow", "failed": "red", "inconclusive": "magenta", "skipped": "dim"}
_LABEL = {"baseline": "declared baseline", "previous_version": "previous version",
          "previous_batch": "previous batch (drift)"}


def _verdict(report: GateReport) -> str:
    passed = report.passed
    return ("skipped: nothing to compare with" if passed is None
            else "PASSED" if passed else "FAILED")


def failing_first(report: GateReport) -> list:
    """The comparisons, failed ones first (then inconclusive, waived, passed, skipped), each
    group in the report's order: what a reader must see first leads."""
    rank = {"failed": 0, "inconclusive": 1, "waived": 2, "passed": 3, "skipped": 4}
    return sorted(report.comparisons, key=lambda c: rank.get(c.status, 5))


@visible_text
def gate_report_markdown(report: GateReport) -> str:
    out = [f"## Regression gate: {_verdict(report)}", ""]
    for t in report.thresholds_failed:  # the configuration's own limits lead when exceeded
        out += [f"**Limit failed: {t.message}**", ""]
    failed = [c for c in report.comparisons if c.status == "failed"]
    if failed:
        out += ["**Failed against " + "; ".join(
            f"the {_LABEL[c.kind]} `{c.baseline_partition}`"
            + (f" ({pct(c.delta, signed=True)} points, {len(c.newly_failing)} newly failing)"
               if c.delta is not None else "") for c in failed) + "**", ""]
    out += ["| comparison | against | status | accuracy | Δ points | newly failing | newly passing |",
            "|---|---|---|---|---|---|---|"]
    for c in report.comparisons:
        against = f"`{c.baseline_partition}`" if c.baseline_partition else "–"
        if c.kind == "previous_batch" and c.baseline_batch:
            against += f" batch `{c.baseline_batch}`"
        acc = ("–" if c.status == "skipped"
               else f"{pct(c.baseline_accuracy)} → {pct(c.candidate_accuracy)}")
        out.append(f"| {_LABEL[c.kind]} | {against} | {c.status} | {acc} | "
                   f"{pct(c.delta, signed=True) if c.delta is not None else '–'} | "
                   f"{len(c.newly_failing)} | {len(c.newly_passing)} |")
    for c in failing_first(report):
        if c.status == "skipped":
            out += ["", f"- {_LABEL[c.kind]}: skipped — {c.reason}"]
            continue
        out += ["", f"### {_LABEL[c.kind]}: {c.status}", "", c.reason, "", "What changed:"]
        out += [f"- {ch.field}: `{ch.baseline}` → `{ch.candidate}`" for ch in c.changes] or ["- nothing recorded"]
    if report.thresholds:
        out += ["", "### Limits (gate:)", ""]
        out += [f"- {t.status}: {t.message}" for t in report.thresholds]
    return "\n".join(out) + "\n"


def render_gate_report(report: GateReport, console: Console | None = None) -> None:
    console = console or Console()
    t = Table(title=f"regression gate: {_verdict(report)}")
    for col in ("comparison", "against", "status", "accuracy", "Δ points", "newly failing"):
        t.add_column(col)
    for c in failing_first(report):
        style = _STATUS[c.status]
        acc = ("" if c.status == "skipped"
               else f"{pct(c.baseline_accuracy)} → {pct(c.candidate_accuracy)}")
        against = c.baseline_partition or ""
        if c.kind == "previous_batch" and c.baseline_batch:
            against += f" {c.baseline_batch}"
        t.add_row(_LABEL[c.kind], escape(against), f"[{style}]{c.status}[/{style}]", acc,
                  pct(c.delta, signed=True) if c.delta is not None else "",
                  escape(", ".join(c.newly_failing[:8]) + (" …" if len(c.newly_failing) > 8 else "")))
    console.print(t)
    for th in report.thresholds:
        style = "green" if th.passed else "bold red"
        console.print(f"[{style}]limit {th.status}[/{style}]: {escape(th.message)}")
    for c in report.comparisons:
        if c.status == "skipped":
            console.print(f"[dim]{_LABEL[c.kind]}: skipped — {escape(c.reason)}[/dim]")
        else:
            changed = "; ".join(str(ch) for ch in c.changes) or "nothing recorded"
            console.print(f"{_LABEL[c.kind]}: {escape(c.reason)}\n  what changed: {escape(changed)}")
