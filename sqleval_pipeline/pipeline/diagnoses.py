"""Stage 3b, diagnoses: every failed attempt diagnosed by the configuration's judges.

Persisted per batch and extended, never redone: a judge's verdict is reused while its version
and the failing grade's grader version are unchanged. The judges read only what the earlier
stages persisted (attempts, executions, grades), never the generator.
"""

from __future__ import annotations

import logging
from pathlib import Path

from sqleval_pipeline.configs import LoadedConfig
from sqleval_pipeline.judging.base import JudgeInput, is_failure
from sqleval_pipeline.judging.llm import LLMJudge
from sqleval_pipeline.judging.rules import RulesJudge
from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline.batch_files import load_artifact, save_artifact
from sqleval_pipeline.pipeline.environment import Environment, EvaluationError, Progress
from sqleval_pipeline.pipeline.executions import iter_executions
from sqleval_pipeline.pipeline.records import Diagnosis, Grade, load_records
from sqleval_pipeline.pipeline.store import BatchInfo
from sqleval_pipeline.pipeline.streams import MissingExecution, joined

log = logging.getLogger(__name__)


def judges_for(loaded: LoadedConfig, cache_dir: Path | None = None) -> list:
    """The judges a configuration asks for: the rules judge always (unless ``judge: none``),
    plus the LLM judge with ``judge: llm`` (its model pinned by ``judge_model``)."""
    cfg = loaded.config
    if cfg.judge == "none":
        return []
    judges: list = [RulesJudge()]
    if cfg.judge == "llm":
        if not cfg.judge_model:
            raise EvaluationError(f"configuration {cfg.name!r}: judge: llm needs judge_model "
                                  "(pinned, and different from the generating model)")
        judges.append(LLMJudge(cfg.judge_model, generator_model=getattr(cfg.generator, "model", None),
                               timeout_s=cfg.timeout_s, max_retries=cfg.max_retries,
                               sees_rows=cfg.judge_sees_rows, cache_dir=cache_dir))
    return judges


def diagnoses_are_current(env: Environment, loaded: LoadedConfig, batch: BatchInfo) -> bool:
    """Every failed attempt has a diagnosis from each of the configuration's judges, made by
    the judge's current version for the grade as it stands (what :func:`stage_diagnoses`
    would keep without asking a judge)."""
    judges = judges_for(loaded, cache_dir=env.store.root / "judge_cache")
    grades = {g.key: g for g in load_records(env.store.artifact(
        batch.partition_key, batch.batch_id, bf.GRADES), Grade) if is_failure(g)}
    stored = load_artifact(env.store.artifact(batch.partition_key, batch.batch_id, bf.DIAGNOSES), Diagnosis)
    if stored is None:
        return not grades or not judges
    have = {(d.judge, d.judge_version, d.key, d.grader_version) for d in stored}
    return all((j.name, j.version, k, g.grader_version) in have for j in judges for k, g in grades.items())


def stage_diagnoses(env: Environment, loaded: LoadedConfig, batch: BatchInfo,
                    progress: Progress | None = None) -> list:
    """Diagnose every failed attempt with the configuration's judges (persisted per batch;
    a judge's verdicts are reused as long as its version is unchanged)."""
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
