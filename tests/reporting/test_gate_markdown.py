"""The gate's rendering leads with what failed (issue 24, item 4)."""

from __future__ import annotations

from sqleval_pipeline.pipeline.comparisons import Comparison, GateReport
from sqleval_pipeline.reporting.gate import failing_first, gate_report_markdown, render_gate_report


def _report() -> GateReport:
    return GateReport(partition_key="c@2", batch_id="b2", comparisons=[
        Comparison(kind="baseline", baseline_partition="base@1", baseline_batch="b0", status="passed",
                   reason="within the threshold", baseline_accuracy=0.8, candidate_accuracy=0.79, delta=-0.01),
        Comparison(kind="previous_version", baseline_partition="c@1", baseline_batch="b1", status="failed",
                   reason="dropped 12 points", baseline_accuracy=0.9, candidate_accuracy=0.78, delta=-0.12,
                   newly_failing=["q1", "q2", "q3"]),
        Comparison(kind="previous_batch", status="skipped", reason="no earlier batch"),
    ])


def test_the_failing_comparison_leads():
    text = gate_report_markdown(_report())
    lines = text.splitlines()
    assert lines[0] == "## Regression gate: FAILED"
    assert lines[2] == "**Failed against the previous version `c@1` (-12.0 points, 3 newly failing)**"
    sections = [line for line in lines if line.startswith("### ")]
    assert sections[0].startswith("### previous version: failed")
    assert [c.kind for c in failing_first(_report())] == ["previous_version", "baseline", "previous_batch"]


def test_nothing_failed_means_no_lead_line_and_inconclusive_renders():
    report = _report()
    report.comparisons[1] = report.comparisons[1].model_copy(update={"status": "inconclusive"})
    text = gate_report_markdown(report)
    assert "**Failed against" not in text
    render_gate_report(report)  # an inconclusive comparison has a colour too (was a KeyError)
