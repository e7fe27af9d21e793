"""Everything the HTML report shows, read from the store (docs/report.md); nothing is written.

:func:`collect` returns a :class:`ReportData` for some configuration versions (default: every
version with a scorecard), each at its newest scored batch: the scorecard, the batch's
comparisons (``comparisons.json`` with each comparison's ``diff.json``/``gate.json``), its
calibrated refusal, every case with its runs (:func:`sqleval_pipeline.pipeline.casefile.batch_details`),
the trend over every stored scorecard, the judges' calibration (``<store>/calibration.json``)
and the security evidence (:mod:`.evidence`). Rendering is :mod:`.page`'s job.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.pipeline.casefile import CaseDetail, batch_details, check_partition
from sqleval_pipeline.pipeline.comparisons import COMPARISONS_FILE, Comparison, GateReport, batch_inputs
from sqleval_pipeline.pipeline.environment import Environment, EvaluationError
from sqleval_pipeline.reporting.html.evidence import Evidence, collect_evidence
from sqleval_pipeline.scoring.diff import Diff
from sqleval_pipeline.scoring.gate import Decision, GateResult, load_decisions
from sqleval_pipeline.scoring.scorecard import CalibratedRefusal, CaseResult, Scorecard, SliceMetrics
from sqleval_pipeline.pipeline.store import BatchInfo, batch_order
# a judge's categories are trusted from this many labels and this kappa (calibration.json's
# own thresholds win when it records them)
from sqleval_pipeline.judging.calibration import MIN_CALIBRATION_KAPPA as MIN_KAPPA
from sqleval_pipeline.judging.calibration import MIN_CALIBRATION_N as MIN_LABELS
from sqleval_pipeline.judging.calibration import calibration_status
from sqleval_pipeline.scoring import diff, gate, IncomparableScorecards
from sqleval_pipeline.scoring.changes import what_changed

#: rows kept per result in the drill-down, and characters per cell (longer cells end in "…")
MAX_ROWS = 10
CELL_CHARS = 300
KIND_LABELS = {"baseline": "declared baseline", "previous_version": "previous version",
               "previous_batch": "previous batch (drift)", "report": "computed for this report"}


@dataclass
class SplitRow:
    label: str
    metrics: SliceMetrics
    tuned: bool


@dataclass
class ComparisonView:
    """One comparison of an evaluation with an earlier one."""

    comparison: Comparison
    diff: Diff | None
    gate: GateResult | None
    recorded: bool = True  # False: computed for this report, never gated

    @property
    def label(self) -> str:
        kind = self.comparison.kind if self.recorded else "report"
        return KIND_LABELS.get(kind, kind)


@dataclass
class Evaluation:
    """One configuration version at one batch."""

    batch: BatchInfo
    card: Scorecard
    comparisons: list[ComparisonView]
    calibrated_refusal: CalibratedRefusal | None
    cases: list[CaseDetail]
    missing_cases: list[str]

    @property
    def key(self) -> str:
        return self.batch.partition_key

    @property
    def splits(self) -> list[SplitRow]:
        """Held-out first, then dev, then overall; a split read while tuning is marked."""
        sc = self.card
        rows = [SplitRow(f"{k} split", sc.by_split[k], (k == "dev" and sc.tuned)
                         or (k == "heldout" and sc.tuned_heldout))
                for k in ("heldout", "dev") if k in sc.by_split]
        return rows + [SplitRow("overall", sc.overall, sc.tuned)]

    @property
    def power_label(self) -> str:
        """``able to rank N-point differences`` or ``diagnostic only`` (the scorecard's power)."""
        p = self.card.power
        able = [r.difference_points for r in p.rows if r.cases_needed_clustered <= p.n_cases]
        return f"able to rank {min(able)}-point differences" if able else "diagnostic only"

    @property
    def gate_status(self) -> str:
        """inconclusive (an outage batch) / failed / waived / passed over the recorded
        comparisons; ``not gated`` without one."""
        if self.card.inconclusive:
            return "inconclusive"
        made = [v.comparison.status for v in self.comparisons
                if v.recorded and v.comparison.status != "skipped"]
        for status in ("inconclusive", "failed", "waived", "passed"):
            if status in made:
                return status
        return "not gated"

    @property
    def heldout(self) -> SliceMetrics | None:
        """The held-out split's metrics (None: the batch has no held-out case)."""
        h = self.card.by_split.get("heldout")
        return h if h is not None and h.n_cases else None

    @property
    def flipping(self) -> list[CaseResult]:
        return [c for c in self.card.cases if c.flipped]


@dataclass
class JudgeStatus:
    judge: str
    agreement: float | None
    kappa: float | None
    n: int
    calibrated: bool
    label: str


@dataclass
class TrendPoint:
    """The overall accuracy of one stored scorecard."""

    partition_key: str
    batch_id: str
    created_at: str
    accuracy: float | None
    low: float | None
    high: float | None
    strict: float | None
    n_attempts: int
    #: the interval's method (scorecards written before methods were recorded: cluster bootstrap)
    kind: str = "cluster"
    method: str = "cluster bootstrap"

    @property
    def config_name(self) -> str:
        return self.partition_key.rsplit("@", 1)[0]

    @property
    def version(self) -> str:
        return self.partition_key.rsplit("@", 1)[-1]


@dataclass
class ReportData:
    generated_at: str
    project: str
    snapshot_id: str
    as_of: str
    evaluations: list[Evaluation]
    trend: list[TrendPoint]
    judges: list[JudgeStatus] | None
    calibration_note: str | None
    decisions: list[Decision]
    evidence: Evidence
    notes: list[str] = field(default_factory=list)

    def judge(self, name: str | None) -> JudgeStatus | None:
        return next((j for j in self.judges or [] if j.judge == name), None)


# --------------------------------------------------------------------------- reading


def scored_partitions(env: Environment) -> list[str]:
    """Every configuration version with a scorecard in a complete batch."""
    return [k for k in env.store.partitions() if _newest_scored(env, k) is not None]


def _newest_scored(env: Environment, key: str) -> BatchInfo | None:
    for b in reversed(env.store.batches(key)):
        if b.status == "complete" and env.store.artifact(key, b.batch_id, bf.SCORECARD).exists():
            return b
    return None


def _model(path: Path, model):
    return model.model_validate_json(path.read_text(encoding="utf-8")) if path.exists() else None


def _clip_rows(detail: CaseDetail) -> CaseDetail:
    """Long cells cut to CELL_CHARS characters (the report stays small and readable)."""
    results = [detail.case.expected, *detail.case.alternatives,
               *(r.execution.result for r in detail.runs if r.execution is not None)]
    for rows in results:
        if rows is not None:
            rows.rows = [[v[:CELL_CHARS - 1] + "…" if isinstance(v, str) and len(v) > CELL_CHARS
                          else v for v in row] for row in rows.rows]
    return detail


def _comparisons(folder: Path) -> list[ComparisonView]:
    report = _model(folder / COMPARISONS_FILE, GateReport)
    out = []
    for c in report.comparisons if report else []:
        sub = folder if c.kind == "baseline" else folder / c.kind
        recorded = c.status != "skipped"
        out.append(ComparisonView(
            comparison=c, diff=_model(sub / bf.DIFF, Diff) if recorded else None,
            gate=_model(sub / bf.GATE, GateResult) if recorded else None))
    return out


def evaluation(env: Environment, key: str, batch: BatchInfo | None = None) -> Evaluation:
    """A configuration version at ``batch`` (default: its newest scored batch)."""
    check_partition(env, key)
    batch = batch or _newest_scored(env, key)
    if batch is None:
        raise EvaluationError(f"{key} has no scorecard yet (no complete, scored batch); run "
                              "`sqleval run -c CONFIG` first")
    folder = env.store.batch_dir(key, batch.batch_id)
    cases = [_clip_rows(d) for d in batch_details(env, key, batch.batch_id, max_rows=MAX_ROWS)]
    shown = {d.case.id for d in cases}
    return Evaluation(
        batch=batch, card=Scorecard.load(folder / bf.SCORECARD),
        comparisons=_comparisons(folder),
        calibrated_refusal=_model(folder / bf.CALIBRATED_REFUSAL, CalibratedRefusal),
        cases=cases, missing_cases=[c for c in batch.case_ids if c not in shown])


def _adhoc(env: Environment, evals: list[Evaluation], decisions: list[Decision]) -> None:
    """Each evaluation not already compared with the report's first (oldest) one gets that
    paired comparison, computed here and marked as such (never a recorded gate)."""
    if len(evals) < 2:
        return
    ref = evals[0]
    for e in evals[1:]:
        if any(v.comparison.baseline_partition == ref.key and v.comparison.status != "skipped"
               for v in e.comparisons):
            continue
        changes = what_changed(batch_inputs(env, ref.batch, ref.card), batch_inputs(env, e.batch, e.card))
        # kind "baseline" for the model; ``recorded=False`` labels it "computed for this report"
        common = {"kind": "baseline", "baseline_partition": ref.key,
                  "baseline_batch": ref.batch.batch_id, "changes": changes}
        try:
            d = diff(ref.card, e.card)
        except IncomparableScorecards as exc:
            e.comparisons.append(ComparisonView(Comparison(**common, status="skipped", reason=str(exc)),
                                                None, None, recorded=False))
            continue
        g = gate(ref.card, e.card, decisions, comparison=d, candidate_batch=e.batch.batch_id)
        status = "failed" if not g.passed else ("waived" if g.waived else "passed")
        e.comparisons.append(ComparisonView(Comparison(
            **common, status=status, reason=g.message, baseline_accuracy=g.baseline_accuracy,
            candidate_accuracy=g.candidate_accuracy, delta=g.delta, newly_failing=d.newly_failing,
            newly_passing=d.newly_passing), d, g, recorded=False))


def trend(env: Environment) -> list[TrendPoint]:
    """Overall accuracy of every stored scorecard (every version, every complete batch), oldest first."""
    points = []
    for key in env.store.partitions():
        for b in env.store.batches(key):
            p = env.store.artifact(key, b.batch_id, bf.SCORECARD)
            if b.status != "complete" or not p.exists():
                continue
            data = json.loads(p.read_text(encoding="utf-8"))
            overall = data.get("overall") or {}
            acc, ci = overall.get("accuracy") or {}, (overall.get("accuracy") or {}).get("ci") or {}
            points.append((batch_order(b), TrendPoint(
                partition_key=key, batch_id=b.batch_id, created_at=b.created_at,
                accuracy=acc.get("value"), low=ci.get("low"), high=ci.get("high"),
                strict=(overall.get("strict_accuracy") or {}).get("value"),
                n_attempts=overall.get("n_attempts", 0), kind=ci.get("kind", "cluster"),
                method=ci.get("method", "cluster bootstrap"))))
    return [p for _, p in sorted(points, key=lambda x: x[0])]


def judge_statuses(path: Path) -> tuple[list[JudgeStatus] | None, str | None]:
    """Each judge's agreement with people from the stored calibration (None: not stored)."""
    if not path.exists():
        return None, ("no judge calibration stored (the judge_calibration asset writes it: "
                      "`sqleval demo`, or materialize it in the UI): every category is uncalibrated")
    data = json.loads(path.read_text(encoding="utf-8"))
    # the rule applied again to the stored numbers: a file written before the kappa threshold
    # existed says "calibrated" on the label count alone
    min_n, min_kappa = data.get("min_n", MIN_LABELS), data.get("min_kappa", MIN_KAPPA)
    out = []
    for j in data.get("judges", []):
        n, kappa = int(j.get("n", 0)), j.get("kappa")
        label = calibration_status(n, kappa, min_n, min_kappa)
        out.append(JudgeStatus(judge=j["judge"], agreement=j.get("agreement_rate"), kappa=kappa,
                               n=n, calibrated=label == "calibrated", label=label))
    return out, None


def collect(env: Environment, partition_keys: Sequence[str] | None = None,
            now: dt.datetime | None = None) -> ReportData:
    """The report's data for ``partition_keys`` (default: every version with a scorecard)."""
    keys = list(dict.fromkeys(partition_keys or scored_partitions(env)))
    if not keys:
        raise EvaluationError(f"no scorecard in the store {env.store.root}: evaluate a "
                              "configuration first (`sqleval run -c CONFIG` or `sqleval demo`)")
    evals = sorted((evaluation(env, k) for k in keys), key=lambda e: batch_order(e.batch))
    decisions = load_decisions(env.decisions)
    _adhoc(env, evals, decisions)
    versions = {e.card.config_version for e in evals}
    relevant = [d for d in decisions if any(v.startswith(d.baseline) or v.startswith(d.candidate)
                                            for v in versions)]
    judges, note = judge_statuses(env.store.root / "calibration.json")
    notes = [f"{e.key}: {len(e.missing_cases)} case(s) of batch {e.batch.batch_id} are not in the "
             f"golden set any more or have no stored attempt: {', '.join(e.missing_cases[:5])}"
             for e in evals if e.missing_cases]
    notes += [f"{e.key}: batch {e.batch.batch_id} ran on snapshot {e.batch.snapshot_id}, the "
              f"pinned snapshot is {env.snapshot_id}" for e in evals if e.batch.snapshot_id != env.snapshot_id]
    return ReportData(
        generated_at=(now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds"),
        project=env.project.name, snapshot_id=env.snapshot_id, as_of=env.as_of.isoformat(),
        evaluations=evals, trend=trend(env), judges=judges, calibration_note=note,
        decisions=relevant, evidence=collect_evidence(env, now), notes=notes)
