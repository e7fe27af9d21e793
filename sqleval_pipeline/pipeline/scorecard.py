"""Stage 4, the scorecard: a batch's grades and diagnoses summed up with honest intervals.

Deterministic (a fixed bootstrap seed) and content-addressed (:mod:`.derived`): a re-run whose
inputs are unchanged reuses the stored ``scorecard.json``; only the judge's calibration line,
which reads the human labels, is brought up to date.
"""

from __future__ import annotations

from sqleval_pipeline.configs import LoadedConfig
from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline import derived
from sqleval_pipeline.pipeline.batch_files import load_artifact
from sqleval_pipeline.pipeline.calibration import judge_calibration_status
from sqleval_pipeline.pipeline.derived import code_digest, inputs_digest
from sqleval_pipeline.pipeline.environment import Environment
from sqleval_pipeline.pipeline.records import Diagnosis, Grade, load_records
from sqleval_pipeline.pipeline.store import BatchInfo
from sqleval_pipeline.scoring import Scorecard, build_scorecard, load_scorecard


def score_batch(env: Environment, loaded: LoadedConfig, batch: BatchInfo,
                grades: list[Grade] | None = None):
    """The scorecard of a batch from its stored grades (or ``grades``) and diagnoses; writes nothing."""
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
    return inputs_digest("scorecard", code_digest("sqleval_pipeline.scoring", "sqleval_pipeline.pipeline.scorecard"),
                         folder / bf.GRADES, folder / bf.DIAGNOSES, loaded.version,
                         loaded.partition_key, loaded.config.tuned_on_dev, loaded.config.tuned_on_heldout,
                         batch.policy_version, folder / bf.ATTEMPTS,
                         loaded.config.pricing.model_dump(mode="json") if loaded.config.pricing else None)


def stage_scorecard(env: Environment, loaded: LoadedConfig, batch: BatchInfo):
    """The batch's scorecard, written to ``scorecard.json`` — or the one written before, when
    its inputs are unchanged (only the judge's calibration line, which reads the human labels,
    is brought up to date)."""
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


def scorecard_is_current(env: Environment, loaded: LoadedConfig, batch: BatchInfo) -> bool:
    """The stored scorecard was made from the batch's current inputs, and its judge's
    calibration line still says what the human labels say."""
    folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
    done = derived.reusable(folder, bf.SCORECARD, scorecard_inputs(env, loaded, batch))
    if done is None:
        return False
    card = load_scorecard(done)
    return not card.failure_histogram_judge or \
        card.failure_histogram_calibration == judge_calibration_status(env, card.failure_histogram_judge)


def latest_scorecard(env: Environment, partition_key: str, batch_id: str | None = None):
    """The newest scorecard stored for a configuration version, with its batch; with
    ``batch_id``, that batch's (None, None when it has none): what a run just made or reused,
    which is not the newest batch when a run of other cases or runs came after it."""
    if batch_id is not None:
        found = env.store.get(partition_key, batch_id)
        candidates = [found] if found is not None else []
    else:
        candidates = reversed(env.store.batches(partition_key))
    for b in candidates:
        p = env.store.artifact(partition_key, b.batch_id, bf.SCORECARD)
        if b.status == "complete" and p.exists():
            return load_scorecard(p), b
    return None, None
