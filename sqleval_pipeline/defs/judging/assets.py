"""Judge calibration: agreement of each judge with the human labels in evals/labels/."""

import dagster as dg

from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline.defs.resources import SqlevalHome
from sqleval_pipeline.reporting.calibration import calibration_markdown
from sqleval_pipeline.textfiles import write_atomically


@dg.asset(
    group_name="judging", deps=["eval_diagnoses"], kinds={"python"},
    check_specs=[dg.AssetCheckSpec(
        "judges_calibrated", asset="judge_calibration",
        description="Every judge in use has at least 20 human-labelled attempts; an "
                    "uncalibrated judge's categories should not be trusted")],
)
def judge_calibration(context: dg.AssetExecutionContext, sqleval: SqlevalHome):
    """Agreement rate, Cohen's kappa and confusion of each judge against human labels, and
    the two judges' disagreement table (newest diagnoses of each labelled configuration)."""
    env = sqleval.environment()
    report = ev.calibration_report(env)
    if report is not None:
        write_atomically(ev.calibration_path(env), report.model_dump_json(indent=2) + "\n")
    if report is None:
        yield dg.MaterializeResult(metadata={"labels": 0})
        yield dg.AssetCheckResult(check_name="judges_calibrated", passed=False,
                                  severity=dg.AssetCheckSeverity.WARN,
                                  metadata={"reason": "no human labels in evals/labels"})
        return
    yield dg.MaterializeResult(metadata={
        "labels": report.n_labels,
        "judges": dg.MetadataValue.json({j.judge: {"n": j.n, "agreement": j.agreement_rate,
                                                  "kappa": j.kappa, "status": j.status}
                                         for j in report.judges}),
        "report": dg.MetadataValue.md(calibration_markdown(report)),
    })
    uncalibrated = [j.judge for j in report.judges if not j.calibrated]
    yield dg.AssetCheckResult(
        check_name="judges_calibrated", passed=not uncalibrated and bool(report.judges),
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"uncalibrated": dg.MetadataValue.json(uncalibrated),
                  "summary": dg.MetadataValue.md("\n".join(f"- {line}" for line in
                                                           ev.calibration_lines(report)))},
    )
