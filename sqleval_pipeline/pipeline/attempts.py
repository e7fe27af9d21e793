"""Stage 1, attempts: the configuration's generator asked every case of the batch, each run.

A batch is chosen (or resumed, or reused as stored) under the partition's lock, the
configuration as evaluated is recorded beside it (``inputs.json``), and the attempts are
written by the generation runner; a finished batch is never regenerated.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqleval_pipeline.configs import LoadedConfig
from sqleval_pipeline.generation import make_generator
from sqleval_pipeline.generation.context import ContextBuilder, cached_catalog
from sqleval_pipeline.generation.runner import open_batch, run_attempts
from sqleval_pipeline.golden.model import golden_hash
from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline.environment import Environment, Progress, select_cases
from sqleval_pipeline.pipeline.store import BatchInfo, file_lock
from sqleval_pipeline.scoring.changes import INPUTS_FILE
from sqleval_pipeline.semantic import project_glossary


def record_inputs(env: Environment, loaded: LoadedConfig, batch: BatchInfo) -> None:
    """Write the configuration as evaluated into the batch (once: a batch's inputs are fixed;
    the comparisons stage reads them to say what changed between two batches)."""
    path = env.store.artifact(batch.partition_key, batch.batch_id, INPUTS_FILE)
    if path.exists():
        return
    data = {"configuration": loaded.config.model_dump(mode="json"),
            "input_digests": loaded.input_digests}
    env.store.write_json(batch.partition_key, batch.batch_id, INPUTS_FILE, data)


def reusable_batch(env: Environment, loaded: LoadedConfig, *, runs: int | None = None,
                   case_ids: Sequence[str] | None = None, split: str | None = None) -> BatchInfo | None:
    """The finished batch an evaluation in ``latest`` mode would reuse as it is (complete, not
    inconclusive, intact, executed under the current guard policy), or None when it would
    generate, resume, retry or open a new batch. Writes nothing (a damaged batch is left for
    the evaluation to mark)."""
    cfg = loaded.config
    cases = select_cases(env.cases, case_ids=case_ids, split=split)
    gh, ids, runs = golden_hash(cases), [c.id for c in cases], runs or cfg.runs
    for b in reversed(env.store.batches(loaded.partition_key)):
        if b.snapshot_id == env.snapshot_id and b.golden_hash == gh and b.case_ids == ids \
                and b.runs == runs and b.status != "damaged":
            ok = (b.status == "complete" and not b.inconclusive
                  and b.policy_version == env.policy(cfg.guard or None).version
                  and env.store.artifact(b.partition_key, b.batch_id, bf.ATTEMPTS).exists()
                  and not env.store.damaged(b))
            return b if ok else None
    return None


def stage_attempts(env: Environment, loaded: LoadedConfig, *, mode: str = "latest",
                   runs: int | None = None, case_ids: Sequence[str] | None = None,
                   split: str | None = None, batch_id: str | None = None,
                   progress: Progress | None = None):
    """Generate (or resume, or reuse) the attempts of one configuration version."""
    cfg = loaded.config
    cases = select_cases(env.cases, case_ids=case_ids, split=split)
    runs = runs or cfg.runs

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
