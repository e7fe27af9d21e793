"""The evaluation stages as plain functions: attempts → executions → grades → scorecard → gate.

Each stage reads what earlier stages persisted in the batch folder (see
:mod:`sqleval_pipeline.pipeline.store`). Attempts and executions are written once per batch and never
recomputed (a changed guard policy gets a new batch); grades once per grader version (an older
grader's are kept beside them); diagnoses are extended, never redone, for a judge whose version
is unchanged; the scorecard, diff and gate are rebuilt from those on every run (deterministic:
a fixed bootstrap seed). No stage writes into another batch's folder. The Dagster assets
(``defs/evaluation``) call these functions, and the CLI materializes those assets, so there is
one pipeline.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline.batch_files import artifact_file, load_artifact, save_artifact  # noqa: F401 (used here and re-exported)
from sqleval_pipeline.pipeline import derived
from sqleval_pipeline.configs import LoadedConfig, load_configs
from sqleval_pipeline.pipeline.derived import code_digest, inputs_digest
# the environment the stages share (re-exported: callers use ev.environment, ev.Environment ...)
from sqleval_pipeline.pipeline.environment import (  # noqa: F401
    Environment, EvaluationError, Progress, environment, find_config, select_cases,
)
from sqleval_pipeline.pipeline.records import Execution, Grade, load_records, save_records
from sqleval_pipeline.scoring.changes import INPUTS_FILE
from sqleval_pipeline.pipeline.store import BatchInfo

log = logging.getLogger(__name__)



# ---- stage 1: attempts --------------------------------------------------------------------



def record_inputs(env: Environment, loaded: LoadedConfig, batch: BatchInfo) -> None:
    """Write the configuration as evaluated into the batch (once: a batch's inputs are fixed;
    the comparisons stage reads them to say what changed between two batches)."""
    path = env.store.artifact(batch.partition_key, batch.batch_id, INPUTS_FILE)
    if path.exists():
        return
    data = {"configuration": loaded.config.model_dump(mode="json"),
            "input_digests": loaded.input_digests}
    env.store.write_json(batch.partition_key, batch.batch_id, INPUTS_FILE, data)


def stage_attempts(env: Environment, loaded: LoadedConfig, *, mode: str = "latest",
                   runs: int | None = None, case_ids: Sequence[str] | None = None,
                   split: str | None = None, batch_id: str | None = None,
                   progress: Progress | None = None):
    """Generate (or resume, or reuse) the attempts of one configuration version."""
    from sqleval_pipeline.generation import make_generator
    from sqleval_pipeline.generation.context import ContextBuilder, cached_catalog
    from sqleval_pipeline.generation.runner import open_batch, run_attempts
    from sqleval_pipeline.semantic import project_glossary

    cfg = loaded.config
    cases = select_cases(env.cases, case_ids=case_ids, split=split)
    runs = runs or cfg.runs
    from sqleval_pipeline.pipeline.store import file_lock

    # choosing a batch and recording it is one step under the partition's lock: two runs of
    # one configuration at once pick the same batch in "latest" mode (the second then waits
    # for the first to fill it), never two half-filled ones
    with file_lock(env.store.config_dir(loaded.partition_key) / ".select.lock"):
        info = open_batch(env.store, partition_key=loaded.partition_key, config_name=cfg.name,
                          config_version=loaded.version, snapshot_id=env.snapshot_id,
                          cases=cases, runs=runs, mode=mode, batch_id=batch_id,
                          policy_version=env.policy(cfg.guard or None).version)
        if env.store.get(info.partition_key, info.batch_id) is None:
            env.store.write_batch(info)
    record_inputs(env, loaded, info)
    builder = generator = None
    finished = info.status == "complete" and env.store.artifact(
        info.partition_key, info.batch_id, bf.ATTEMPTS).exists()
    if not finished:  # a finished batch is reused as stored: nothing to build
        catalog = cached_catalog(str(env.serving), env.as_of, cfg.context.sample_values,
                                 str(env.project.models_dir), env.manifest.serving_schema)
        glossary = project_glossary(env.project) if cfg.context.curation else None
        template = None
        if cfg.generator.kind in ("anthropic", "openai"):
            template = env.project.root / cfg.context.prompt_template
        generator = make_generator(loaded, catalog, glossary, root=env.project.root)
        builder = ContextBuilder(catalog, cfg.context, glossary, env.cases, template, cfg.dialect,
                                 retrieval=getattr(generator, "reads_context", True))
    try:
        result = run_attempts(
            store=env.store, info=info, cases=cases, generator=generator, builder=builder,
            concurrency=cfg.concurrency, max_retries=cfg.max_retries,
            on_progress=(lambda done, total: progress("attempts", done, total)) if progress else None,
        )
        env.store.publish(result.batch)  # shared with the other workers (storage.remote)
        return result
    finally:
        if generator is not None:
            generator.close()


# ---- stage 2: guarded executions ----------------------------------------------------------


@dataclass(frozen=True)
class ExecutionSummary:
    """What the executions stage stored: how many, by status (``refused:<layer>`` apart)."""

    count: int
    status: dict[str, int]


def execution_summary(path: Path) -> ExecutionSummary:
    import duckdb

    if not path.exists():
        return ExecutionSummary(0, {})
    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT CASE WHEN status = 'refused' THEN 'refused:' || layer ELSE status END AS k, "
            "count(*) FROM read_parquet(?) GROUP BY k ORDER BY k", [str(path)]).fetchall()
    finally:
        con.close()
    return ExecutionSummary(sum(n for _k, n in rows), {k: n for k, n in rows})


def stage_executions(env: Environment, loaded: LoadedConfig, batch: BatchInfo,
                     progress: Progress | None = None) -> ExecutionSummary:
    """Run every SQL attempt of the batch through the guard (persisted once per batch),
    streaming: one execution per distinct SQL text, results written as they come."""
    from sqleval_pipeline.guard.executor import GuardedExecutor

    out_path = env.store.artifact(batch.partition_key, batch.batch_id, bf.EXECUTIONS)
    policy = env.policy(loaded.config.guard or None)
    if artifact_file(out_path) is not None:
        if batch.policy_version != policy.version:
            raise EvaluationError(
                f"batch {batch.batch_id} was executed under guard policy {batch.policy_version or 'unrecorded'}, "
                f"not the current {policy.version}; evaluate again (without --batch) to execute its "
                "attempts under the current policy in a new batch")
        return execution_summary(out_path)
    if batch.policy_version not in (None, policy.version):
        raise EvaluationError(f"batch {batch.batch_id} belongs to guard policy {batch.policy_version}, "
                              f"not the current {policy.version}; evaluate again without --batch")
    from sqleval_pipeline.dialect import schema_from_manifest
    from sqleval_pipeline.pipeline.records import RecordWriter
    from sqleval_pipeline.pipeline.streams import attempts as stored_attempts
    from sqleval_pipeline.pipeline.streams import execute_stream

    attempts_path = env.store.artifact(batch.partition_key, batch.batch_id, bf.ATTEMPTS)
    total = batch.counts.get("sql") if batch.counts else None
    log_path = env.store.artifact(batch.partition_key, batch.batch_id, "guard_log.jsonl")
    log_path.unlink(missing_ok=True)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress:
            progress("executions", done, total if total is not None else done)

    with GuardedExecutor(env.serving, as_of=env.as_of, policy=policy, log_path=log_path) as guard, \
            RecordWriter(out_path, Execution) as out:
        # one thread per warm worker keeps the pool busy; results come in the attempts' order
        out.write_all(execute_stream(stored_attempts(attempts_path, sql_only=True), guard,
                                     workers=guard.pool.size, dialect=loaded.config.dialect,
                                     on_done=tick, schema=schema_from_manifest(env.manifest)))
        if not out.count:  # "no SQL attempts" is a legitimate batch: an empty JSON Lines twin
            out.abort()
            save_records(out_path.with_suffix(".jsonl"), [])
    env.store.publish(batch)
    return execution_summary(out_path)


def load_executions(env: Environment, batch: BatchInfo) -> list[Execution]:
    p = env.store.artifact(batch.partition_key, batch.batch_id, bf.EXECUTIONS)
    return load_artifact(p, Execution) or []


def iter_executions(env: Environment, batch: BatchInfo):
    """The batch's executions in stored (attempt) order, streamed; none when there are none."""
    from sqleval_pipeline.pipeline.records import iter_records

    found = artifact_file(env.store.artifact(batch.partition_key, batch.batch_id,
                                             bf.EXECUTIONS))
    return iter(()) if found is None else iter_records(found, Execution)


# ---- stage 3: grades ----------------------------------------------------------------------


def grade_stream(env: Environment, batch: BatchInfo, *, skip_unknown: bool = False):
    """The grade of every attempt of a stored batch under the current grader, in attempt
    order, streamed (writes nothing).

    ``skip_unknown``: attempts of cases the golden set no longer has are left out (an older
    batch re-graded for a comparison: a case removed since cannot be compared); otherwise
    they are an error."""
    from sqleval_pipeline.grading import grade_attempt
    from sqleval_pipeline.grading.vendor_rows import vendor_fields, with_vendor_rows
    from sqleval_pipeline.pipeline.streams import MissingExecution, joined

    attempts_path = env.store.artifact(batch.partition_key, batch.batch_id, bf.ATTEMPTS)
    cases = {c.id: c for c in env.cases}
    try:
        for a, ex in with_vendor_rows(attempts_path, joined(attempts_path, iter_executions(env, batch))):
            if a.case_id not in cases:
                if skip_unknown:
                    continue
                raise EvaluationError(f"attempt for unknown case {a.case_id} in batch {batch.batch_id}")
            grade = grade_attempt(cases[a.case_id], a, ex)
            extra = vendor_fields(cases[a.case_id], a, ex)  # a vendor's own rows, when it sent them
            yield grade.model_copy(update=extra) if extra else grade
    except MissingExecution as exc:
        raise EvaluationError(str(exc)) from exc


def grade_batch(env: Environment, batch: BatchInfo, *, skip_unknown: bool = False) -> list[Grade]:
    """Grade every attempt of a stored batch under the current grader (writes nothing)."""
    return list(grade_stream(env, batch, skip_unknown=skip_unknown))


def stage_grades(env: Environment, batch: BatchInfo) -> list[Grade]:
    """The batch's grades under the current grader (persisted once per grader version).

    Grades made by an older grader are kept, renamed ``grades.<version>.parquet`` (with the
    scorecard built from them, ``scorecard.<version>.json``): a stored artifact is never
    overwritten."""
    from sqleval_pipeline.grading import GRADER_VERSION

    out_path = env.store.artifact(batch.partition_key, batch.batch_id, bf.GRADES)
    if out_path.exists():
        grades = load_records(out_path, Grade)
        if grades and grades[0].grader_version == GRADER_VERSION:
            return grades
        old = grades[0].grader_version if grades else "empty"
        card = out_path.with_name(bf.SCORECARD)
        if card.exists():
            card.replace(card.with_name(f"scorecard.{old}.json"))
        out_path.replace(out_path.with_name(f"grades.{old}.parquet"))
    from sqleval_pipeline.pipeline.records import RecordWriter

    with RecordWriter(out_path, Grade) as out:
        out.write_all(grade_stream(env, batch))
    env.store.publish(batch)
    return load_records(out_path, Grade)


# ---- stage 3b: diagnoses ------------------------------------------------------------------


def judges_for(loaded: LoadedConfig, cache_dir: Path | None = None) -> list:
    """The judges a configuration asks for: the rules judge always (unless ``judge: none``),
    plus the LLM judge with ``judge: llm`` (its model pinned by ``judge_model``)."""
    from sqleval_pipeline.judging.rules import RulesJudge

    cfg = loaded.config
    if cfg.judge == "none":
        return []
    judges: list = [RulesJudge()]
    if cfg.judge == "llm":
        from sqleval_pipeline.judging.llm import LLMJudge

        if not cfg.judge_model:
            raise EvaluationError(f"configuration {cfg.name!r}: judge: llm needs judge_model "
                                  "(pinned, and different from the generating model)")
        judges.append(LLMJudge(cfg.judge_model, generator_model=getattr(cfg.generator, "model", None),
                               timeout_s=cfg.timeout_s, max_retries=cfg.max_retries,
                               sees_rows=cfg.judge_sees_rows, cache_dir=cache_dir))
    return judges


def stage_diagnoses(env: Environment, loaded: LoadedConfig, batch: BatchInfo,
                    progress: Progress | None = None) -> list:
    """Diagnose every failed attempt with the configuration's judges (persisted per batch;
    a judge's verdicts are reused as long as its version is unchanged)."""
    from sqleval_pipeline.judging.base import JudgeInput, is_failure
    from sqleval_pipeline.pipeline.records import Diagnosis

    from sqleval_pipeline.pipeline.streams import MissingExecution, joined

    out_path = env.store.artifact(batch.partition_key, batch.batch_id, bf.DIAGNOSES)
    existing = load_artifact(out_path, Diagnosis) or []
    judges = judges_for(loaded, cache_dir=env.store.root / "judge_cache")
    grades = {g.key: g for g in load_records(env.store.artifact(
        batch.partition_key, batch.batch_id, bf.GRADES), Grade) if is_failure(g)}
    cases = {c.id: c for c in env.cases}
    # a verdict is reused only for the same judge version *and* the same failing grade (grader
    # version): an attempt re-graded by another grader is diagnosed again, one that passes now is not
    kept = {j.name: {d.key: d for d in existing if d.judge == j.name and d.judge_version == j.version
                     and d.key in grades and d.grader_version == grades[d.key].grader_version}
            for j in judges}
    new: dict[str, list] = {j.name: [] for j in judges}
    attempts_path = env.store.artifact(batch.partition_key, batch.batch_id, bf.ATTEMPTS)
    # the served catalog lets the rules judge tell a column of another table from one that
    # exists nowhere; the dialect, a translation failure from the system's own error
    catalog = {t: [c.name for c in info.columns] for t, info in env.manifest.tables.items()}
    dialect = loaded.config.dialect

    def judge_chunk(items: list) -> None:
        for judge in judges:
            todo = [i for i in items if i.grade.key not in kept[judge.name]]
            if not todo:
                continue
            if hasattr(judge, "diagnose_all"):
                made, errors = judge.diagnose_all(todo)
                for key, err in errors:
                    log.warning("judge %s gave no diagnosis for %s: %s", judge.name, key, err)
            else:
                made = [judge.diagnose(i) for i in todo]
            new[judge.name] += [d.model_copy(update={"grader_version": grades[d.key].grader_version})
                                for d in made]

    # failed attempts only, a chunk at a time: what a judge reads (SQL, rows) is never held
    # for the whole batch; a chunk ends at a case boundary so identical runs meet in one call
    chunk: list = []
    try:
        for a, ex in joined(attempts_path, iter_executions(env, batch)):
            g = grades.get(a.key)
            if g is None:
                continue
            if len(chunk) >= 256 and chunk[-1].attempt.case_id != a.case_id:
                judge_chunk(chunk)
                chunk = []
            chunk.append(JudgeInput(case=cases[g.case_id], attempt=a, execution=ex, grade=g,
                                    catalog=catalog, dialect=dialect))
    except MissingExecution as exc:
        raise EvaluationError(str(exc)) from exc
    judge_chunk(chunk)
    result = []
    for judge in judges:
        result += [*kept[judge.name].values(), *new[judge.name]]
        if progress:
            progress(f"judge {judge.name}", len(grades), len(grades))
    save_artifact(out_path, result)
    env.store.publish(batch)
    return result


# ---- stage 4: scorecard -------------------------------------------------------------------


def score_batch(env: Environment, loaded: LoadedConfig, batch: BatchInfo,
                grades: list[Grade] | None = None):
    """The scorecard of a batch from its stored grades (or ``grades``) and diagnoses; writes nothing."""
    from sqleval_pipeline.pipeline.records import Diagnosis
    from sqleval_pipeline.scoring import Scorecard, build_scorecard

    if grades is None:
        grades = load_records(env.store.artifact(batch.partition_key, batch.batch_id,
                                                 bf.GRADES), Grade)
    dpath = env.store.artifact(batch.partition_key, batch.batch_id, bf.DIAGNOSES)
    diagnoses = load_artifact(dpath, Diagnosis) or []
    attempts = env.store.artifact(batch.partition_key, batch.batch_id, bf.ATTEMPTS)
    card: Scorecard = build_scorecard(grades, diagnoses, config_version=loaded.version,
                                      tuned=loaded.config.tuned_on_dev,
                                      tuned_heldout=loaded.config.tuned_on_heldout,
                                      label=loaded.partition_key,
                                      attempts=attempts if attempts.exists() else None,
                                      pricing=loaded.config.pricing)
    return card.model_copy(update={"policy_version": batch.policy_version})


def scorecard_inputs(env: Environment, loaded: LoadedConfig, batch: BatchInfo) -> str:
    """The digest of everything a batch's scorecard is computed from (derived.py): its grades
    and diagnoses, the labels the configuration gives it, the guard policy it ran under and
    the scoring code."""
    folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
    return inputs_digest("scorecard", code_digest("sqleval_pipeline.scoring", "sqleval_pipeline.pipeline.evaluation"),
                         folder / bf.GRADES, folder / bf.DIAGNOSES, loaded.version,
                         loaded.partition_key, loaded.config.tuned_on_dev, loaded.config.tuned_on_heldout,
                         batch.policy_version, folder / bf.ATTEMPTS,
                         loaded.config.pricing.model_dump(mode="json") if loaded.config.pricing else None)


def stage_scorecard(env: Environment, loaded: LoadedConfig, batch: BatchInfo):
    """The batch's scorecard, written to ``scorecard.json`` — or the one written before, when
    its inputs are unchanged (only the judge's calibration line, which reads the human labels,
    is brought up to date)."""
    from sqleval_pipeline.scoring import load_scorecard

    folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
    digest = scorecard_inputs(env, loaded, batch)
    done = derived.reusable(folder, bf.SCORECARD, digest)
    card = load_scorecard(done) if done is not None else score_batch(env, loaded, batch)
    if card.failure_histogram_judge:
        status = judge_calibration_status(env, card.failure_histogram_judge)
        if done is not None and status != card.failure_histogram_calibration:
            done = None  # the labels changed: the same numbers, a new calibration line
        card = card.model_copy(update={"failure_histogram_calibration": status})
    if done is not None:
        return card
    card.save(folder / bf.SCORECARD)
    derived.record(folder, bf.SCORECARD, digest)
    env.store.publish(batch)
    return card


def latest_scorecard(env: Environment, partition_key: str):
    """The newest scorecard stored for a configuration version, with its batch."""
    from sqleval_pipeline.scoring import load_scorecard

    for b in reversed(env.store.batches(partition_key)):
        p = env.store.artifact(partition_key, b.batch_id, bf.SCORECARD)
        if b.status == "complete" and p.exists():
            return load_scorecard(p), b
    return None, None


# ---- stage 5: comparisons and regression gate live in sqleval_pipeline.pipeline.comparisons ----------


# ---- judge calibration (across configurations) ---------------------------------------------


def calibration_report(env: Environment, labels_dir: Path | None = None):
    """Agreement of each judge with the human labels in ``evals/labels/``.

    Labels name attempts by configuration *name*; each is matched against the newest batch of
    that configuration's current version that has diagnoses. Returns None without labels.
    """
    from sqleval_pipeline.judging.calibration import calibrate, load_labels
    from sqleval_pipeline.pipeline.records import Diagnosis

    labels_dir = labels_dir or env.labels_dir
    if not labels_dir.exists() or not any(labels_dir.glob("*.jsonl")):
        return None
    labels = load_labels(labels_dir)
    by_judge: dict[str, list] = {}
    names: dict[str, str] = {}
    configs = {c.name: c for c in load_configs(env.configs_dir, project=env.project, errors=[])}
    for name in sorted({lab.config_name for lab in labels}):
        loaded = configs.get(name)
        if loaded is None:
            continue
        for b in reversed(env.store.batches(loaded.partition_key)):
            diags = load_artifact(env.store.artifact(loaded.partition_key, b.batch_id,
                                                     bf.DIAGNOSES), Diagnosis)
            if diags is not None and b.status == "complete":
                names[loaded.version] = name
                for d in diags:
                    by_judge.setdefault(d.judge, []).append(d)
                break
    settings = env.project.spec.judging
    return calibrate(by_judge, labels, config_name_of=names, min_n=settings.min_labels,
                     min_kappa=settings.min_kappa)


def judge_calibration_status(env: Environment, judge: str) -> str:
    """One line on how far ``judge``'s categories can be trusted, from the human labels."""
    from sqleval_pipeline.judging.calibration import LabelError

    try:
        report = calibration_report(env)
    except (LabelError, ValueError) as exc:
        return f"not known: the labels cannot be read ({str(exc).splitlines()[0]})"
    if report is None:
        return "uncalibrated: no human labels"
    for j in report.judges:
        if j.judge == judge:
            kappa = "n/a" if j.kappa is None else f"{j.kappa:.2f}"
            rate = "n/a" if j.agreement_rate is None else f"{100 * j.agreement_rate:.0f}%"
            return f"{j.status}: agreement {rate}, kappa {kappa}, n={j.n}"
    return "uncalibrated: no labelled attempt of this judge"


def calibration_path(env: Environment) -> Path:
    """Where the judge_calibration asset keeps its report."""
    return env.store.root / "calibration.json"


def calibration_lines(report) -> list[str]:
    """One line per judge: agreement with humans, kappa, n and calibration status."""
    out = []
    for j in report.judges:
        rate = f"{j.agreement_rate * 100:.0f}%" if j.agreement_rate is not None else "n/a"
        kappa = f"{j.kappa:.2f}" if j.kappa is not None else "n/a"
        out.append(f"judge {j.judge}: agreement with humans {rate}, Cohen's kappa {kappa}, "
                   f"n={j.n} — {j.status}")
    return out
