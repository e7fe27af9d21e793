"""Per configuration-version assets: attempts → executions → grades → diagnoses → scorecard → gate.

Thin wrappers over :mod:`sqleval_pipeline.pipeline.evaluation`. Nothing is handed from one stage to
the next through Dagster's IO manager: each materialization records its ``batch_id`` (and the
batch's files as paths), and the next stage continues the batch its upstream asset last
materialized for this partition. Code versions name the rules a stage applies (grader, judge),
so the UI marks grades stale when the grader changes.
"""

import warnings
from enum import Enum

import dagster as dg
from pydantic import Field

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline import comparisons
from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline.pipeline import progress
from sqleval_pipeline.defs.evaluation import metadata as md
from sqleval_pipeline.defs.evaluation.partitions import config_versions
from sqleval_pipeline.defs.evaluation.status import observe_status
from sqleval_pipeline.defs.resources import SqlevalHome
from sqleval_pipeline.grading import GRADER_VERSION
from sqleval_pipeline.judging.rules import RulesJudge
from sqleval_pipeline.reporting.html import batch_report
from sqleval_pipeline.reporting.status import gate_state
from sqleval_pipeline.reporting.gate import gate_report_markdown
from sqleval_pipeline.reporting.scorecard import diff_markdown, scorecard_markdown
from sqleval_pipeline.scoring import Diff, load_scorecard


def upstream_batch(context: dg.AssetExecutionContext, upstream: str) -> str:
    """The batch id the upstream asset last materialized for this partition."""
    found = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(upstream),
                              asset_partitions=[context.partition_key]), limit=1)
    for record in found.records:
        value = record.asset_materialization.metadata.get("batch_id")
        if value is not None:
            return str(value.value)
    raise ev.EvaluationError(f"{upstream} has no materialization with a batch for "
                             f"{context.partition_key}; materialize it first")


def _stage(context: dg.AssetExecutionContext, sqleval: SqlevalHome, upstream: str):
    """(environment, configuration, batch) for a stage that continues its upstream's batch."""
    env = sqleval.environment()
    batch_id = upstream_batch(context, upstream)
    batch = env.store.get(context.partition_key, batch_id)
    if batch is None:
        raise ev.EvaluationError(f"batch {batch_id} of {context.partition_key} is missing "
                                 f"from {env.store.root}; re-materialize eval_attempts")
    return env, ev.find_config(env, context.partition_key, strict=True), batch


def _where(env, batch, *files: str) -> dict:
    """The batch id and the real paths of the batch folder and of the files a stage wrote."""
    folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
    out = {"batch_id": batch.batch_id, "batch_dir": dg.MetadataValue.path(str(folder))}
    for name in files:
        out[name.replace(".", "_")] = dg.MetadataValue.path(str(folder / name))
    return out


class BatchMode(Enum):
    """``latest`` resumes or reuses the newest batch for the same inputs; ``new`` starts a
    fresh batch (the nightly re-evaluation, so provider drift shows up)."""

    latest = "latest"
    new = "new"


class Split(Enum):
    dev = "dev"
    heldout = "heldout"


class AttemptsConfig(dg.Config):
    """The run config of ``eval_attempts`` (typed: the launchpad offers the choices)."""

    batch: BatchMode = BatchMode.latest
    runs: int | None = Field(default=None, ge=1, description="runs per case (default: the configuration's)")
    case_ids: list[str] | None = Field(default=None, description="only these golden cases")
    split: Split | None = Field(default=None, description="only this split")


@dg.asset(partitions_def=config_versions, group_name="evaluation",
          deps=["golden_set", "serving_snapshot"], kinds={"python"})
def eval_attempts(context: dg.AssetExecutionContext, config: AttemptsConfig,
                  sqleval: SqlevalHome) -> dg.MaterializeResult:
    """The system's answers (SQL or refusal) for every case × run of this configuration."""
    env = sqleval.environment()
    loaded = ev.find_config(env, context.partition_key, strict=True)
    run = ev.stage_attempts(env, loaded, mode=BatchMode(config.batch).value, runs=config.runs,
                            case_ids=config.case_ids, split=Split(config.split).value if config.split else None,
                            progress=progress.reporter())
    return dg.MaterializeResult(metadata={
        **_where(env, run.batch, bf.ATTEMPTS, bf.INPUTS),
        "attempts": run.n_attempts, "provider_calls": run.provider_calls,
        "resumed": run.resumed, "kinds": dg.MetadataValue.json(run.batch.counts),
        "generator": loaded.config.generator.kind, "seconds": round(run.seconds, 2),
        "configuration_file": dg.MetadataValue.path(str(loaded.path)),
    })


@dg.asset(partitions_def=config_versions, group_name="evaluation", kinds={"duckdb"},
          deps=[eval_attempts, "guardrail_suite"])
def eval_executions(context: dg.AssetExecutionContext, sqleval: SqlevalHome) -> dg.MaterializeResult:
    """Every SQL attempt run through the guard: rows, or a refusal by a named layer."""
    env, loaded, batch = _stage(context, sqleval, "eval_attempts")
    summary = ev.stage_executions(env, loaded, batch, progress.reporter())
    return dg.MaterializeResult(metadata={
        **_where(env, batch, bf.EXECUTIONS), "executions": summary.count,
        "status": dg.MetadataValue.json(summary.status), "guard_policy": batch.policy_version or ""})


@dg.asset(partitions_def=config_versions, group_name="evaluation", kinds={"python"},
          deps=[eval_executions, "test_suite"], code_version=GRADER_VERSION)
def eval_grades(context: dg.AssetExecutionContext, sqleval: SqlevalHome) -> dg.MaterializeResult:
    """Each attempt's outcome (CORRECT … ERROR) under the written-down grading rules."""
    env, loaded, batch = _stage(context, sqleval, "eval_executions")
    grades = ev.stage_grades(env, batch, loaded)
    outcomes: dict[str, int] = {}
    for g in grades:
        outcomes[str(g.outcome)] = outcomes.get(str(g.outcome), 0) + 1
    folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
    return dg.MaterializeResult(metadata={
        **_where(env, batch, bf.GRADES), "grades": len(grades),
        "outcomes": dg.MetadataValue.json(outcomes),
        "grader_version": grades[0].grader_version if grades else GRADER_VERSION,
        "accidental_matches": sum(g.suite_check == "accidental_match" for g in grades),
        **md.failing_cases(grades, folder)})


@dg.asset(partitions_def=config_versions, group_name="evaluation", kinds={"python"},
          deps=[eval_grades], code_version=RulesJudge.version)
def eval_diagnoses(context: dg.AssetExecutionContext, sqleval: SqlevalHome) -> dg.MaterializeResult:
    """Why each failed attempt failed: rules judge (always) and LLM judge (``judge: llm``)."""
    env, loaded, batch = _stage(context, sqleval, "eval_grades")
    diagnoses = ev.stage_diagnoses(env, loaded, batch, progress.reporter())
    hist: dict[str, dict[str, int]] = {}
    for d in diagnoses:
        hist.setdefault(d.judge, {}).setdefault(d.category, 0)
        hist[d.judge][d.category] += 1
    folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
    return dg.MaterializeResult(metadata={
        **_where(env, batch, bf.DIAGNOSES), "diagnoses": len(diagnoses),
        "histogram": dg.MetadataValue.json(hist), **md.diagnosis_table(diagnoses, folder)})


@dg.asset(partitions_def=config_versions, group_name="evaluation", kinds={"python"},
          deps=[eval_diagnoses])
def eval_scorecard(context: dg.AssetExecutionContext, sqleval: SqlevalHome) -> dg.MaterializeResult:
    """Accuracy with honest 95% intervals (each naming its method), per slice, over runs;
    refusals and errors apart."""
    env, loaded, batch = _stage(context, sqleval, "eval_diagnoses")
    card = ev.stage_scorecard(env, loaded, batch)
    overall = card.overall
    split = {f"accuracy_{name} (%)": md.pct(s.accuracy.value if s.accuracy else None)
             for name, s in sorted(card.by_split.items())}
    return dg.MaterializeResult(metadata={
        **_where(env, batch, bf.SCORECARD),
        "accuracy (%)": md.pct(overall.accuracy.value if overall.accuracy else None),
        "strict_accuracy (%)": md.pct(overall.strict_accuracy.value
                                      if overall.strict_accuracy else None),
        **split, "cases": card.n_cases, "attempts": card.n_attempts,
        **md.scorecard_metadata(card),
        "scorecard": dg.MetadataValue.md(scorecard_markdown(card)),
    })


with warnings.catch_warnings():  # partitioned asset checks are a preview API in Dagster 1.13
    warnings.simplefilter("ignore", dg.PreviewWarning)
    _gate_spec = dg.AssetCheckSpec(
        "regression_gate", asset="eval_gate", blocking=True, partitions_def=config_versions,
        description="This version is not worse than its baseline configuration, than the "
                    "previous version of the same configuration, or (beyond sampling noise) "
                    "than its own previous batch — unless evals/decisions.yaml records a "
                    "decision. Not evaluated (skipped) when there was nothing to compare with; "
                    "failed with a warning when a comparison is inconclusive.")


# a multi-asset only so that the check may be left unevaluated (can_subset): Dagster shows a
# planned check the step did not yield as skipped, never as passed or failed
@dg.multi_asset(
    specs=[dg.AssetSpec("eval_gate", deps=[eval_scorecard], group_name="evaluation", kinds={"python"},
                        description="Paired diffs against the baseline, the previous version and "
                                    "the previous batch, with what changed between them; the "
                                    "regression gate over all three.")],
    check_specs=[_gate_spec], partitions_def=config_versions, can_subset=True)
def eval_gate(context: dg.AssetExecutionContext, sqleval: SqlevalHome):
    """Paired diffs against the baseline, the previous version and the previous batch, with
    what changed between them; the regression gate over all three; then every configuration's
    status (``configuration_status``)."""
    env, loaded, batch = _stage(context, sqleval, "eval_scorecard")
    card = load_scorecard(env.store.artifact(batch.partition_key, batch.batch_id, bf.SCORECARD))
    report = comparisons.stage_gate(env, loaded, batch, card)
    diff, _gate = comparisons.baseline_diff_gate(env, batch)
    folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
    summary = gate_report_markdown(report)
    meta = {**_where(env, batch, bf.COMPARISONS), "gate": dg.MetadataValue.md(summary),
            **md.gate_tables(report, env, folder)}
    try:  # the page a person opens, written after the gate so it shows the gate's comparisons
        meta["report"] = dg.MetadataValue.path(str(batch_report(env, batch.partition_key, batch.batch_id)))
    except Exception as exc:  # noqa: BLE001 - the gate stands without its page
        context.log.warning(f"HTML report not written: {exc}")
    # the diff shown is the failing comparison's (the declared baseline's when none failed)
    failing = next((c for c in report.comparisons if c.status == "failed"), None)
    shown = "baseline"
    if failing is not None and failing.kind != "baseline" and (folder / failing.kind / bf.DIFF).exists():
        diff = Diff.model_validate_json((folder / failing.kind / bf.DIFF).read_text(encoding="utf-8"))
        shown = failing.kind
    if diff is not None:
        meta["diff"] = dg.MetadataValue.md(diff_markdown(diff))
        meta["diff_against"] = shown
    yield dg.MaterializeResult(asset_key="eval_gate", metadata=meta)
    try:  # every configuration's status, whichever ran: read from the store
        context.log_event(observe_status(env))
    except Exception as exc:  # noqa: BLE001 - the gate stands without the overview
        context.log.warning(f"configuration status not observed: {exc}")
    passed = report.passed
    if passed is None and not report.inconclusive:
        return  # nothing to compare with: the check stays unevaluated (shown as skipped)
    yield dg.AssetCheckResult(
        check_name="regression_gate", passed=bool(passed),
        severity=dg.AssetCheckSeverity.WARN if gate_state(report) == "inconclusive" else dg.AssetCheckSeverity.ERROR,
        description=report.summary(),
        metadata={"status": f"inconclusive: {report.inconclusive}" if report.inconclusive
                  else "passed" if passed else "failed",
                  "batch_id": batch.batch_id, "gate": dg.MetadataValue.md(summary),
                  **{f"{c.kind}_delta (points)": md.pct(c.delta)
                     for c in report.comparisons if c.delta is not None}},
    )
