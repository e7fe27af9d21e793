"""Stage 5: the comparisons a batch is gated on, each with what changed.

A batch is compared with up to three earlier evaluations:

``baseline``
    the newest scorecard of the configuration named by its ``baseline:`` field (the gate a
    candidate must pass before it replaces the baseline);
``previous_version``
    the newest scorecard of an *earlier version of the same configuration name* (a file
    edited in place: without this, a 44-point drop hides behind "baseline 49% → 49%");
``previous_batch``
    the previous batch of the *same version* (the nightly re-run: provider drift). Two runs
    of one system differ by sampling, so only a drop whose paired interval excludes zero
    fails, and only a decision naming the batch accepts it.

Each comparison that fails needs its own recorded decision in ``evals/decisions.yaml``. The
declared baseline's diff and gate stay in ``diff.json``/``gate.json`` of the batch folder;
every comparison, with "what changed", is in ``comparisons.json``. Only this batch's folder
is written.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import duckdb
from pydantic import BaseModel, Field

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline import derived
from sqleval_pipeline.configs import Configuration, LoadedConfig, load_configs
from sqleval_pipeline.pipeline.derived import code_digest, inputs_digest
from sqleval_pipeline.pipeline.environment import Environment, EvaluationError, Progress, find_config
from sqleval_pipeline.pipeline import evaluation as ev
from sqleval_pipeline.pipeline.grades import grade_batch
from sqleval_pipeline.pipeline.scorecard import score_batch
from sqleval_pipeline.pipeline.suite_checks import SUITE_MARK, grader_for
from sqleval_pipeline.pipeline.records import save_records
from sqleval_pipeline.scoring.changes import INPUTS_FILE, Change, RunInputs, what_changed
from sqleval_pipeline.scoring.gate import ThresholdCheck, check_thresholds
from sqleval_pipeline.pipeline.store import INCONCLUSIVE_ERROR_SHARE
from sqleval_pipeline.pipeline.store import BatchInfo, batch_order
from sqleval_pipeline.golden.model import golden_hash
from sqleval_pipeline.grading import GRADER_VERSION
from sqleval_pipeline.scoring import (
    Diff, GateResult, IncomparableScorecards, calibrated_refusal, diff, gate, load_decisions, load_scorecard,
)

COMPARISONS_FILE = bf.COMPARISONS
Kind = Literal["baseline", "previous_version", "previous_batch"]


class Comparison(BaseModel):
    kind: Kind
    baseline_partition: str | None = None
    baseline_batch: str | None = None
    status: Literal["passed", "waived", "failed", "skipped", "inconclusive"]
    reason: str = Field(description="why it was skipped, or the gate's message")
    baseline_accuracy: float | None = None
    candidate_accuracy: float | None = None
    delta: float | None = None
    newly_failing: list[str] = Field(default_factory=list)
    newly_passing: list[str] = Field(default_factory=list)
    changes: list[Change] = Field(default_factory=list)


class GateReport(BaseModel):
    partition_key: str
    batch_id: str
    comparisons: list[Comparison]
    #: why the batch is not a measurement (too many ERROR attempts: an outage), or None
    inconclusive: str | None = None
    #: the configuration's own limits (``gate:`` latency and cost), checked on this batch's
    #: scorecard whatever there is to compare with
    thresholds: list[ThresholdCheck] = Field(default_factory=list)

    @property
    def evaluated(self) -> list[Comparison]:
        return [c for c in self.comparisons if c.status != "skipped"]

    @property
    def thresholds_failed(self) -> list[ThresholdCheck]:
        return [t for t in self.thresholds if not t.passed]

    @property
    def passed(self) -> bool | None:
        """False when the batch is inconclusive, any comparison failed or a limit is exceeded
        (or unmeasured); None when nothing could be checked (not a pass)."""
        if self.inconclusive or self.thresholds_failed or \
                any(c.status in ("failed", "inconclusive") for c in self.comparisons):
            return False
        return True if self.evaluated or self.thresholds else None

    def summary(self) -> str:
        parts = [f"INCONCLUSIVE: {self.inconclusive}"] if self.inconclusive else []
        parts += [t.message for t in self.thresholds]
        for c in self.comparisons:
            if c.status == "skipped":
                parts.append(f"{c.kind}: skipped ({c.reason})")
            else:
                acc = (f"{_pct(c.baseline_accuracy)} → {_pct(c.candidate_accuracy)}"
                       f" vs {c.baseline_partition}"
                       + (f" batch {c.baseline_batch}" if c.kind == "previous_batch" else ""))
                parts.append(f"{c.kind}: {c.status} ({acc})")
        return "; ".join(parts)


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


# ---- what each batch was made from ---------------------------------------------------------


def batch_inputs(env: Environment, batch: BatchInfo, card=None,
                 current: LoadedConfig | None = None) -> RunInputs:
    """A batch's inputs: what it recorded, its scorecard's grader, its diagnoses' judges and
    the model strings its provider reported. ``current``: the configuration file loaded now,
    used for a batch made before it recorded its configuration (same version only)."""
    folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
    recorded = {}
    if (folder / INPUTS_FILE).exists():
        recorded = json.loads((folder / INPUTS_FILE).read_text(encoding="utf-8"))
    elif current is not None and current.version == batch.config_version:
        recorded = {"configuration": current.config.model_dump(mode="json"),
                    "input_digests": current.input_digests}
    judges: dict[str, str] = {}
    models: list[str] = []
    con = duckdb.connect()
    try:
        if (folder / bf.DIAGNOSES).exists():
            rows = con.execute("SELECT DISTINCT judge, coalesce(judge_version, 'unversioned') "
                               "FROM read_parquet(?) ORDER BY 1, 2",
                               [str(folder / bf.DIAGNOSES)]).fetchall()
            for judge, version in rows:
                judges[judge] = version if judge not in judges else f"{judges[judge]},{version}"
        if (folder / bf.ATTEMPTS).exists():
            models = [r[0] for r in con.execute(
                "SELECT DISTINCT model FROM read_parquet(?) WHERE model IS NOT NULL ORDER BY 1",
                [str(folder / bf.ATTEMPTS)]).fetchall()]
    finally:
        con.close()
    return RunInputs(
        partition_key=batch.partition_key, config_name=batch.config_name,
        config_version=batch.config_version, batch_id=batch.batch_id,
        snapshot_id=batch.snapshot_id, golden_hash=batch.golden_hash,
        grader_version=getattr(card, "grader_version", None), judge_versions=judges,
        policy_version=batch.policy_version, configuration=recorded.get("configuration"),
        input_digests=recorded.get("input_digests") or {}, provider_models=models)


# ---- finding what to compare with ----------------------------------------------------------


def _scorecard_of(env: Environment, batch: BatchInfo):

    p = env.store.artifact(batch.partition_key, batch.batch_id, bf.SCORECARD)
    return load_scorecard(p) if batch.status == "complete" and p.exists() else None


def _newest_scored(env: Environment, partition_key: str, before: BatchInfo | None = None):
    """(scorecard, batch) of the newest complete, scored batch of a version (created before
    ``before`` when given), or (None, None)."""
    for b in reversed(env.store.batches(partition_key)):
        if before is not None and (b.batch_id == before.batch_id
                                   or batch_order(b) >= batch_order(before)):
            continue
        card = _scorecard_of(env, b)
        if card is not None:
            return card, b
    return None, None


def _previous_version(env: Environment, batch: BatchInfo):
    """(scorecard, batch) of the newest scored batch of another version of the same name."""
    best = (None, None)
    for key in env.store.partitions():
        if key == batch.partition_key or key.rsplit("@", 1)[0] != batch.config_name:
            continue
        card, b = _newest_scored(env, key, before=batch)
        if b is not None and (best[1] is None or batch_order(b) > batch_order(best[1])):
            best = (card, b)
    return best


# ---- the gate ------------------------------------------------------------------------------


#: a comparison to make: (kind, (earlier scorecard, its batch, its configuration) or the
#: skipped comparison that stands in for it)
_Planned = tuple[Kind, "tuple[object, BatchInfo, LoadedConfig | None] | Comparison"]


def _plan(env: Environment, loaded: LoadedConfig, batch: BatchInfo) -> list[_Planned]:
    """What this batch is compared with: the declared baseline's newest scored batch, the
    newest scored batch of an earlier version, this version's previous scored batch."""
    plan: list[_Planned] = []
    base_name = loaded.config.baseline
    if not base_name or base_name == loaded.name:
        plan.append(("baseline", Comparison(kind="baseline", status="skipped",
                                            reason="no baseline configured")))
    else:
        try:
            base_loaded = find_config(env, base_name)
        except EvaluationError as exc:
            plan.append(("baseline", Comparison(kind="baseline", status="skipped", reason=str(exc))))
        else:
            base_card, base_batch = _newest_scored(env, base_loaded.partition_key)
            plan.append(("baseline", (base_card, base_batch, base_loaded) if base_card is not None else
                         Comparison(kind="baseline", baseline_partition=base_loaded.partition_key,
                                    status="skipped", reason=f"baseline {base_loaded.partition_key} has "
                                    "no scorecard yet; evaluate it first")))
    prev_card, prev_batch = _previous_version(env, batch)
    plan.append(("previous_version", (prev_card, prev_batch, None) if prev_card is not None else
                 Comparison(kind="previous_version", status="skipped",
                            reason=f"no earlier version of {loaded.name} was scored")))
    last_card, last_batch = _newest_scored(env, batch.partition_key, before=batch)
    plan.append(("previous_batch", (last_card, last_batch, loaded) if last_card is not None else
                 Comparison(kind="previous_batch", status="skipped", reason="first batch of this version")))
    return plan


#: the files of a batch a comparison reads (scorecard, grades and executions for a re-grade,
#: diagnoses and attempts for "what changed", the recorded configuration)
_COMPARED_FILES = (bf.SCORECARD, bf.GRADES, bf.EXECUTIONS, bf.DIAGNOSES,
                   bf.ATTEMPTS, INPUTS_FILE)


def gate_inputs(env: Environment, loaded: LoadedConfig, batch: BatchInfo, plan: list[_Planned],
                fail_on_case_regression: bool) -> str:
    """The digest of everything the gate of ``batch`` is computed from (derived.py)."""

    def files(b: BatchInfo) -> list:
        folder = env.store.batch_dir(b.partition_key, b.batch_id)
        return [b.partition_key, b.batch_id, *(folder / n for n in _COMPARED_FILES)]

    parts: list = ["gate", code_digest("sqleval_pipeline.pipeline.comparisons", "sqleval_pipeline.scoring",
                                       "sqleval_pipeline.grading"), GRADER_VERSION,
                   golden_hash(env.cases), env.decisions, fail_on_case_regression, loaded.version,
                   loaded.config.model_dump(mode="json"), *files(batch)]
    for kind, target in plan:
        if isinstance(target, Comparison):
            parts += [kind, target.model_dump(mode="json")]
        else:
            _card, b, base_loaded = target
            parts += [kind, *files(b), base_loaded.partition_key if base_loaded else None,
                      base_loaded.config.model_dump(mode="json") if base_loaded else None]
    return inputs_digest(*parts)


def gate_is_current(env: Environment, loaded: LoadedConfig, batch: BatchInfo,
                    *, fail_on_case_regression: bool = False) -> bool:
    """The stored comparisons and gate were computed from what they would be computed from
    now (the batch's files, the batches compared with, the decisions, the golden set)."""
    folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
    digest = gate_inputs(env, loaded, batch, _plan(env, loaded, batch), fail_on_case_regression)
    return derived.reusable(folder, COMPARISONS_FILE, digest) is not None


def stage_gate(env: Environment, loaded: LoadedConfig, batch: BatchInfo, card,
               *, fail_on_case_regression: bool = False) -> GateReport:
    """Every comparison of this batch, gated; written to the batch folder — or the result
    written before, when nothing it is computed from changed (derived.py)."""

    plan = _plan(env, loaded, batch)
    folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
    digest = gate_inputs(env, loaded, batch, plan, fail_on_case_regression)
    done = derived.reusable(folder, COMPARISONS_FILE, digest)
    if done is not None:
        return GateReport.model_validate_json(done.read_text(encoding="utf-8"))
    decisions = load_decisions(env.decisions)
    mine = batch_inputs(env, batch, card, loaded)
    comparisons: list[Comparison] = []
    for kind, target in plan:
        if isinstance(target, Comparison):
            comparisons.append(target)
            continue
        base_card, base_batch, base_loaded = target
        comparisons.append(_compare(env, kind, base_card, base_batch, base_loaded, card, batch, mine,
                                    decisions, fail_on_case_regression, write_main=kind == "baseline"))
    outage = None
    if card.inconclusive:
        outage = (f"{card.errors.count} of {card.attempts_total} attempts are ERROR "
                  f"({100 * (card.error_share or 0):.0f}%, more than {100 * INCONCLUSIVE_ERROR_SHARE:.0f}%: "
                  "a provider outage or a harness fault, not answers); run the same configuration "
                  "again to retry them")
    report = GateReport(partition_key=batch.partition_key, batch_id=batch.batch_id,
                        comparisons=comparisons, inconclusive=outage,
                        thresholds=check_thresholds(card, loaded.config.gate))
    env.store.write_json(batch.partition_key, batch.batch_id, COMPARISONS_FILE,
                         report.model_dump(mode="json"))
    derived.record(folder, COMPARISONS_FILE, digest)
    env.store.publish(batch)
    return report


def _compare(env: Environment, kind: Kind, base_card, base_batch: BatchInfo,
             base_loaded: LoadedConfig | None, card, batch: BatchInfo, mine: RunInputs,
             decisions, fail_on_case_regression: bool, write_main: bool = False) -> Comparison:

    theirs = batch_inputs(env, base_batch, base_card, base_loaded)
    changes = what_changed(theirs, mine)
    if base_card.grader_version != card.grader_version:
        base_card = _rebase(env, base_batch, base_loaded, batch, kind, card.grader_version)
        theirs.grader_version = base_card.grader_version
        changes = what_changed(theirs, mine)
    common = {"kind": kind, "baseline_partition": base_batch.partition_key,
              "baseline_batch": base_batch.batch_id, "changes": changes}
    if base_card.inconclusive:  # an outage is nothing to compare with
        return Comparison(**common, status="skipped",
                          reason=f"{base_batch.batch_id} of {base_batch.partition_key} is inconclusive "
                                 f"({base_card.errors.count} of {base_card.attempts_total} attempts are ERROR)")
    try:
        comparison = diff(base_card, card)
    except IncomparableScorecards as exc:
        if kind == "baseline":
            raise
        return Comparison(**common, status="skipped", reason=str(exc))
    result = gate(base_card, card, decisions, fail_on_case_regression=fail_on_case_regression,
                  comparison=comparison, candidate_batch=batch.batch_id,
                  drift=kind == "previous_batch")
    sub = "" if write_main else f"{kind}/"
    env.store.write_json(batch.partition_key, batch.batch_id, f"{sub}diff.json",
                         comparison.model_dump(mode="json"))
    env.store.write_json(batch.partition_key, batch.batch_id, f"{sub}gate.json",
                         result.model_dump(mode="json"))
    if write_main:  # calibrated refusal (docs/grading.md): do stricter refusals earn their keep?
        env.store.write_json(batch.partition_key, batch.batch_id, bf.CALIBRATED_REFUSAL,
                             calibrated_refusal(base_card, card).model_dump(mode="json"))
    status = ("inconclusive" if result.inconclusive else "failed" if not result.passed
              else "waived" if result.waived else "passed")
    return Comparison(**common, status=status, reason=result.message,
                      baseline_accuracy=result.baseline_accuracy,
                      candidate_accuracy=result.candidate_accuracy, delta=result.delta,
                      newly_failing=comparison.newly_failing,
                      newly_passing=comparison.newly_passing)


def _rebase(env: Environment, base_batch: BatchInfo, base_loaded: LoadedConfig | None,
            batch: BatchInfo, kind: Kind, grader_version: str):
    """The earlier batch re-graded under the candidate's grader (``grader_version``: the rules,
    and the test suite when the candidate was graded on it), without model calls. Its own
    files are never rewritten: the copy goes into this batch's folder, so candidates gating
    against one baseline at once never write the same file."""
    loaded = base_loaded or _loaded_for(env, base_batch)
    # cases removed from the golden set since cannot be compared: they are left out (the
    # comparison is per case, over the cases both batches have)
    regraded = grade_batch(env, base_batch, skip_unknown=True,
                           grader=grader_for(env, SUITE_MARK in grader_version))
    card = score_batch(env, loaded, base_batch, grades=regraded)
    rebased = env.store.artifact(batch.partition_key, batch.batch_id,
                                 f"rebased/{base_batch.partition_key}/{base_batch.batch_id}")
    save_records(rebased / bf.GRADES, regraded)
    card.save(rebased / bf.SCORECARD)
    return card


def _loaded_for(env: Environment, batch: BatchInfo) -> LoadedConfig:
    """A configuration to score an older version's batch with: its recorded configuration,
    else the current file of that name (scoring reads only labels such as tuned_on_dev)."""

    folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
    if (folder / INPUTS_FILE).exists():
        data = json.loads((folder / INPUTS_FILE).read_text(encoding="utf-8"))
        config = Configuration.model_validate(data["configuration"])
        return LoadedConfig(config=config, path=folder / INPUTS_FILE,
                            version=batch.config_version)
    for c in load_configs(env.configs_dir, project=env.project, errors=[]):
        if c.name == batch.config_name:
            return c.model_copy(update={"version": batch.config_version})
    raise EvaluationError(f"batch {batch.batch_id} of {batch.partition_key}: its configuration "
                          "is neither recorded nor in the configurations folder; cannot re-grade")


def baseline_diff_gate(env: Environment, batch: BatchInfo):
    """(diff, gate result) against the declared baseline, as the gate stage stored them, or
    (None, None) when that comparison was skipped."""

    folder = env.store.batch_dir(batch.partition_key, batch.batch_id)
    report = folder / COMPARISONS_FILE
    if not report.exists() or not (folder / bf.GATE).exists():
        return None, None
    if json.loads(report.read_text())["comparisons"][0]["status"] == "skipped":
        return None, None
    return (Diff.model_validate_json((folder / bf.DIFF).read_text()),
            GateResult.model_validate_json((folder / bf.GATE).read_text()))


# ---- all stages, in process -----------------------------------------------------------------


@dataclass
class EvaluationResult:
    loaded: LoadedConfig
    batch: BatchInfo
    scorecard: object
    report: GateReport
    diff: object | None
    gate: object | None
    baseline: str | None
    provider_calls: int
    seconds: dict[str, float]


def evaluate(env: Environment, loaded: LoadedConfig, *, mode: str = "latest",
             runs: int | None = None, case_ids: Sequence[str] | None = None,
             split: str | None = None, progress: Progress | None = None) -> EvaluationResult:
    """All five stages for one configuration version, in process (used by tests and
    benchmarks; the CLI and the UI go through the Dagster assets, which call the same stage
    functions). It lives with the last stage so that no stage imports a later one."""
    t = {}
    t0 = time.perf_counter()
    run = ev.stage_attempts(env, loaded, mode=mode, runs=runs, case_ids=case_ids, split=split,
                         progress=progress)
    t["attempts"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ev.stage_executions(env, loaded, run.batch, progress)
    t["executions"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ev.stage_grades(env, run.batch, loaded)
    t["grades"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ev.stage_diagnoses(env, loaded, run.batch, progress)
    t["diagnoses"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    card = ev.stage_scorecard(env, loaded, run.batch)
    t["scorecard"] = time.perf_counter() - t0
    report = stage_gate(env, loaded, run.batch, card)
    d, g = baseline_diff_gate(env, run.batch)
    base = report.comparisons[0].baseline_partition
    return EvaluationResult(loaded, run.batch, card, report, d, g, base, run.provider_calls, t)
