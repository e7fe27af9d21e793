"""Per configuration-version assets: attempts → executions → grades → scorecard → gate.

Thin wrappers over :mod:`sqleval_pipeline.evaluation`; each returns the batch it worked on
(a small dict, kept by Dagster's IO manager) so the next stage reads that batch's files.
"""

import dagster as dg

from sqleval_pipeline import evaluation as ev
from sqleval_pipeline import progress
from sqleval_pipeline.defs.evaluation.partitions import config_versions
from sqleval_pipeline.defs.resources import SqlevalHome


def _stage(context: dg.AssetExecutionContext, sqleval: SqlevalHome, ref: dict):
    """(environment, configuration, batch) for a stage that continues the batch ``ref``."""
    env = sqleval.environment()
    batch = env.store.get(ref["partition_key"], ref["batch_id"])
    if batch is None:
        raise ev.EvaluationError(f"batch {ref['batch_id']} of {ref['partition_key']} is missing "
                                 f"from {env.store.root}; re-materialize eval_attempts")
    return env, ev.find_config(env, context.partition_key), batch


class AttemptsConfig(dg.Config):
    batch: str = "latest"
    """'latest' resumes or reuses the newest batch for the same inputs; 'new' starts a fresh
    batch (the nightly re-evaluation, so provider drift shows up)."""
    runs: int | None = None
    case_ids: list[str] | None = None
    split: str | None = None


@dg.asset(partitions_def=config_versions, group_name="evaluation",
          deps=["golden_set", "serving_snapshot"], kinds={"python"})
def eval_attempts(context: dg.AssetExecutionContext, config: AttemptsConfig,
                  sqleval: SqlevalHome) -> dict:
    """The system's answers (SQL or refusal) for every case × run of this configuration."""
    env = sqleval.environment()
    loaded = ev.find_config(env, context.partition_key)
    run = ev.stage_attempts(env, loaded, mode=config.batch, runs=config.runs,
                            case_ids=config.case_ids, split=config.split,
                            progress=progress.reporter())
    context.add_output_metadata({
        "batch_id": run.batch.batch_id, "attempts": len(run.attempts),
        "provider_calls": run.provider_calls, "resumed": run.resumed,
        "kinds": dg.MetadataValue.json(run.batch.counts),
        "generator": loaded.config.generator.kind, "seconds": round(run.seconds, 2),
    })
    return {"partition_key": run.batch.partition_key, "batch_id": run.batch.batch_id}


@dg.asset(partitions_def=config_versions, group_name="evaluation", kinds={"duckdb"})
def eval_executions(context: dg.AssetExecutionContext, sqleval: SqlevalHome,
                    eval_attempts: dict) -> dict:
    """Every SQL attempt run through the guard: rows, or a refusal by a named layer."""
    env, loaded, batch = _stage(context, sqleval, eval_attempts)
    execs = ev.stage_executions(env, loaded, batch, progress.reporter())
    status: dict[str, int] = {}
    for e in execs:
        k = e.status if e.status != "refused" else f"refused:{e.layer}"
        status[k] = status.get(k, 0) + 1
    context.add_output_metadata({"executions": len(execs), "status": dg.MetadataValue.json(status)})
    return eval_attempts


@dg.asset(partitions_def=config_versions, group_name="evaluation", kinds={"python"})
def eval_grades(context: dg.AssetExecutionContext, sqleval: SqlevalHome,
                eval_executions: dict) -> dict:
    """Each attempt's outcome (CORRECT … ERROR) under the written-down grading rules."""
    env, _loaded, batch = _stage(context, sqleval, eval_executions)
    grades = ev.stage_grades(env, batch)
    outcomes: dict[str, int] = {}
    for g in grades:
        outcomes[str(g.outcome)] = outcomes.get(str(g.outcome), 0) + 1
    context.add_output_metadata({"grades": len(grades), "outcomes": dg.MetadataValue.json(outcomes),
                                 "grader_version": grades[0].grader_version if grades else ""})
    return eval_executions


@dg.asset(partitions_def=config_versions, group_name="evaluation", kinds={"python"})
def eval_diagnoses(context: dg.AssetExecutionContext, sqleval: SqlevalHome,
                   eval_grades: dict) -> dict:
    """Why each failed attempt failed: rules judge (always) and LLM judge (``judge: llm``)."""
    env, loaded, batch = _stage(context, sqleval, eval_grades)
    diagnoses = ev.stage_diagnoses(env, loaded, batch, progress.reporter())
    hist: dict[str, dict[str, int]] = {}
    for d in diagnoses:
        hist.setdefault(d.judge, {}).setdefault(d.category, 0)
        hist[d.judge][d.category] += 1
    context.add_output_metadata({"diagnoses": len(diagnoses), "histogram": dg.MetadataValue.json(hist)})
    return eval_grades


@dg.asset(partitions_def=config_versions, group_name="evaluation", kinds={"python"})
def eval_scorecard(context: dg.AssetExecutionContext, sqleval: SqlevalHome,
                   eval_diagnoses: dict) -> dict:
    """Accuracy with cluster-bootstrap intervals, per slice, over runs; refusals and errors apart."""
    from sqleval_pipeline.reporting.scorecard import scorecard_markdown

    env, loaded, batch = _stage(context, sqleval, eval_diagnoses)
    card = ev.stage_scorecard(env, loaded, batch)
    overall = card.overall
    context.add_output_metadata({
        "accuracy": overall.accuracy.value if overall.accuracy else None,
        "strict_accuracy": overall.strict_accuracy.value if overall.strict_accuracy else None,
        "scorecard": dg.MetadataValue.md(scorecard_markdown(card)),
        "path": dg.MetadataValue.path(str(env.store.artifact(batch.partition_key, batch.batch_id,
                                                             "scorecard.json"))),
    })
    return eval_diagnoses


@dg.asset(partitions_def=config_versions, group_name="evaluation", kinds={"python"},
          check_specs=[dg.AssetCheckSpec(
              "regression_gate", asset="eval_gate", blocking=True,
              description="Accuracy never drops below the baseline configuration's without a "
                          "recorded decision in evals/decisions.yaml")])
def eval_gate(context: dg.AssetExecutionContext, sqleval: SqlevalHome, eval_scorecard: dict):
    """Paired diff against the configuration's baseline, and the regression gate."""
    from sqleval_pipeline.scoring import load_scorecard
    from sqleval_pipeline.reporting.scorecard import diff_markdown, gate_markdown

    env, loaded, batch = _stage(context, sqleval, eval_scorecard)
    card = load_scorecard(env.store.artifact(batch.partition_key, batch.batch_id, "scorecard.json"))
    comparison, result, base = ev.stage_gate(env, loaded, batch, card)
    if result is None:
        yield dg.Output(eval_scorecard, metadata={"baseline": base})
        yield dg.AssetCheckResult(check_name="regression_gate", passed=True,
                                  severity=dg.AssetCheckSeverity.WARN,
                                  metadata={"skipped": base})
        return
    yield dg.Output(eval_scorecard, metadata={"baseline": base,
                                              "diff": dg.MetadataValue.md(diff_markdown(comparison))})
    yield dg.AssetCheckResult(
        check_name="regression_gate", passed=result.passed,
        metadata={"gate": dg.MetadataValue.md(gate_markdown(result)), "baseline": base,
                  "delta": result.delta if result.delta is not None else 0.0},
    )
