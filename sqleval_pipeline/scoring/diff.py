"""Paired comparison of two scorecards (docs/grading.md, docs/configurations.md).

Cases are paired by id. A case *passes* when more than half of its graded runs succeeded
(CORRECT, CORRECT_FACTS, or DEFERRED_CORRECTLY on a should-refuse case). Metric deltas get
paired bootstrap intervals that resample the same units for both configurations: clusters
with at least ``stats.MIN_CLUSTERS`` of them, else the wider of the case and the cluster
bootstrap (cases alone with one cluster); a degenerate paired distribution (e.g. no
discordant case) gets the exact bound of :func:`stats.exact_shift_bound`, never [0, 0]. Each
interval names its method. McNemar's exact test runs on the per-case pass/fail pairs.

>>> from sqleval_pipeline.pipeline.records import Grade
>>> from sqleval_pipeline.scoring.scorecard import build_scorecard
>>> def sc(cfg, outcomes):
...     return build_scorecard([Grade(config_version=cfg, case_id=f"q{i}", run_index=0, outcome=o,
...         reason="x", grader_version="r1", band="answerable", difficulty="top_k", split="dev",
...         cluster=f"c{i % 2}") for i, o in enumerate(outcomes)], resamples=200)
>>> d = diff(sc("base", ["CORRECT", "WRONG", "CORRECT"]), sc("cand", ["WRONG", "CORRECT", "CORRECT"]))
>>> d.newly_failing, d.newly_passing, d.metric("accuracy").delta
(['q0'], ['q1'], 0.0)
>>> d.metric("accuracy").ci.kind
'wider'
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

from sqleval_pipeline.scoring import stats
from sqleval_pipeline.scoring.scorecard import (
    ANSWERABLE_BANDS,
    METRICS,
    CaseResult,
    Interval,
    PowerAnalysis,
    Scorecard,
    power_analysis,
)
from sqleval_pipeline.textfiles import write_atomically
from sqleval_pipeline.errors import InputError, SqlevalError

DIFF_SCHEMA = "sqleval.diff/1"


class IncomparableScorecards(SqlevalError, ValueError):
    """The two scorecards measure different things (grader or snapshot) and were not re-based."""


class MetricDelta(BaseModel):
    metric: str
    slice: str = Field(description="'overall', 'split:dev', 'difficulty:top_k', 'band:answerable'")
    baseline: float | None
    candidate: float | None
    delta: float | None
    ci: Interval | None = None


class CaseChange(BaseModel):
    case_id: str
    band: str
    split: str
    difficulty: str
    baseline_outcomes: list[str | None]
    candidate_outcomes: list[str | None]
    baseline_pass: bool | None
    candidate_pass: bool | None
    change: str = Field(description="newly_failing | newly_passing | still_failing | still_passing | ungraded")
    candidate_failure_categories: list[str] = Field(default_factory=list)


class McNemar(BaseModel):
    pass_to_fail: int
    fail_to_pass: int
    n_paired: int
    p_value: float
    method: str = "exact McNemar (two-sided binomial test on discordant pairs)"
    unit: str = Field("case", description="the pairing unit: each case's majority verdict (the test "
                      "does not model clusters; the paired interval does)")


class HistogramShift(BaseModel):
    category: str
    baseline: int
    candidate: int
    delta: int


class Diff(BaseModel):
    schema_version: str = DIFF_SCHEMA
    baseline_config: str
    candidate_config: str
    baseline_grader_version: str
    candidate_grader_version: str
    baseline_snapshot_id: str | None
    candidate_snapshot_id: str | None
    baseline_policy_version: str | None = None
    candidate_policy_version: str | None = None
    rebased: bool
    n_paired_cases: int
    only_in_baseline: list[str]
    only_in_candidate: list[str]
    newly_failing: list[str]
    newly_passing: list[str]
    still_failing: list[str]
    metrics: list[MetricDelta]
    mcnemar: McNemar
    histogram_shift: list[HistogramShift] | None
    power: PowerAnalysis
    cases: list[CaseChange]
    bootstrap_seed: int
    bootstrap_resamples: int
    #: fewest clusters for a plain paired cluster bootstrap (None: written before the rule)
    min_clusters: int | None = None
    notes: list[str] = Field(default_factory=list)

    def metric(self, metric: str, slice: str = "overall") -> MetricDelta:
        for m in self.metrics:
            if m.metric == metric and m.slice == slice:
                return m
        raise KeyError((metric, slice))

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Diff:
        data = json.loads(text)
        if data.get("schema_version") != DIFF_SCHEMA:
            raise InputError(f"unsupported diff schema {data.get('schema_version')!r} (expected {DIFF_SCHEMA})")
        return cls.model_validate(data)

    def save(self, path: str | os.PathLike[str]) -> Path:
        p = Path(path)
        write_atomically(p, self.to_json())  # a crash never leaves half a file
        return p


def check_comparable(baseline: Scorecard, candidate: Scorecard) -> list[str]:
    """Reasons the two scorecards cannot be compared without re-basing (empty: comparable)."""
    problems = []
    if baseline.grader_version != candidate.grader_version:
        problems.append(
            f"grader versions differ ({baseline.grader_version} vs {candidate.grader_version}): changing the "
            "grader changes the metric; re-grade both with one grader, or pass rebase=True / --rebase to "
            "compare across the change knowingly"
        )
    if baseline.snapshot_id != candidate.snapshot_id:
        problems.append(
            f"snapshots differ ({baseline.snapshot_id} vs {candidate.snapshot_id}): the expected results are "
            "not the same; re-run both on one snapshot, or pass rebase=True / --rebase"
        )
    return problems


def _delta(base_cases: list[CaseResult], cand_cases: list[CaseResult], metric: str, slice_name: str,
           *, seed: int, resamples: int, min_clusters: int = stats.MIN_CLUSTERS) -> MetricDelta:
    num_k, den_k = METRICS[metric]
    bc = [c.counts() for c in base_cases]
    cc = [c.counts() for c in cand_cases]
    nb, db = [x[num_k] for x in bc], [x[den_k] for x in bc]
    nc, dc = [x[num_k] for x in cc], [x[den_k] for x in cc]
    sb, sdb, sc, sdc = sum(nb), sum(db), sum(nc), sum(dc)
    b = None if sdb == 0 else float(sb / sdb)
    c = None if sdc == 0 else float(sc / sdc)
    ci = None
    if b is not None and c is not None:
        # the baseline's clusters on both sides (diff() copies them onto the candidate's cases)
        ci = Interval.of(stats.paired_delta_interval(
            nb, db, nc, dc, [x.cluster for x in base_cases], resamples=resamples, seed=seed,
            min_clusters=min_clusters))
    return MetricDelta(metric=metric, slice=slice_name, baseline=b, candidate=c,
                       delta=None if b is None or c is None else c - b, ci=ci)


def diff(
    baseline: Scorecard,
    candidate: Scorecard,
    *,
    rebase: bool = False,
    seed: int = stats.DEFAULT_SEED,
    resamples: int = stats.DEFAULT_RESAMPLES,
    min_clusters: int = stats.MIN_CLUSTERS,
) -> Diff:
    """Paired per-case and per-metric comparison of two scorecards.

    Raises :class:`IncomparableScorecards` when grader versions or snapshots differ, unless
    ``rebase=True`` (the diff then says it was re-based).
    """
    problems = check_comparable(baseline, candidate)
    if problems and not rebase:
        raise IncomparableScorecards("refusing to compare: " + "; ".join(problems))
    notes = [f"re-based: {p}" for p in problems]
    if baseline.policy_version != candidate.policy_version:
        notes.append(f"guard policies differ ({baseline.policy_version or 'unrecorded'} vs "
                     f"{candidate.policy_version or 'unrecorded'}): a change of limits, allowlist or "
                     "denied functions can turn answers into refusals (or back); part of what changed")
    base_by = {c.case_id: c for c in baseline.cases}
    cand_by = {c.case_id: c for c in candidate.cases}
    paired_ids = sorted(base_by.keys() & cand_by.keys())
    for cid in paired_ids:
        b, c = base_by[cid], cand_by[cid]
        if (b.band, b.cluster, b.split, b.difficulty) != (c.band, c.cluster, c.split, c.difficulty):
            notes.append(f"case {cid!r} changed metadata between the scorecards; baseline metadata used for slices")
    # use the baseline's metadata for both sides so that slices and clusters pair up
    base_cases = [base_by[i] for i in paired_ids]
    cand_cases = [cand_by[i].model_copy(update={
        "band": base_by[i].band, "cluster": base_by[i].cluster, "split": base_by[i].split,
        "difficulty": base_by[i].difficulty}) for i in paired_ids]
    kw = {"seed": seed, "resamples": resamples, "min_clusters": min_clusters}

    metrics: list[MetricDelta] = [_delta(base_cases, cand_cases, m, "overall", **kw) for m in METRICS]
    for attr, values in (("split", ("dev", "heldout")),
                         ("difficulty", sorted({c.difficulty for c in base_cases})),
                         ("band", sorted({c.band for c in base_cases}))):
        for v in values:
            idx = [k for k, c in enumerate(base_cases) if getattr(c, attr) == v]
            if not idx:
                continue
            bs, cs = [base_cases[k] for k in idx], [cand_cases[k] for k in idx]
            names = ("accuracy", "strict_accuracy") if attr != "band" or v in ANSWERABLE_BANDS else ("refusal_hold",)
            metrics.extend(_delta(bs, cs, m, f"{attr}:{v}", **kw) for m in names)

    changes: list[CaseChange] = []
    newly_failing, newly_passing, still_failing = [], [], []
    b_to_f = f_to_p = 0
    discordant = n_pairs = 0
    for b, c in zip(base_cases, cand_cases, strict=True):
        bp, cp = b.passed, c.passed
        if bp is None or cp is None:
            change = "ungraded"
        elif bp and not cp:
            change = "newly_failing"
            newly_failing.append(b.case_id)
        elif cp and not bp:
            change = "newly_passing"
            newly_passing.append(b.case_id)
        elif not bp:
            change = "still_failing"
            still_failing.append(b.case_id)
        else:
            change = "still_passing"
        if bp is not None and cp is not None and b.band in ANSWERABLE_BANDS:
            n_pairs += 1
            if bp != cp:
                discordant += 1
                if bp:
                    b_to_f += 1
                else:
                    f_to_p += 1
        changes.append(CaseChange(
            case_id=b.case_id, band=b.band, split=b.split, difficulty=b.difficulty,
            baseline_outcomes=b.outcomes, candidate_outcomes=c.outcomes,
            baseline_pass=bp, candidate_pass=cp, change=change,
            candidate_failure_categories=c.failure_categories,
        ))

    shift = None
    if baseline.failure_histogram is not None or candidate.failure_histogram is not None:
        hb = Counter(baseline.failure_histogram or {})
        hc = Counter(candidate.failure_histogram or {})
        shift = [HistogramShift(category=k, baseline=hb[k], candidate=hc[k], delta=hc[k] - hb[k])
                 for k in sorted(hb.keys() | hc.keys())]
        if baseline.failure_histogram is None or candidate.failure_histogram is None:
            notes.append("only one scorecard has diagnoses: the histogram shift is one-sided")

    overall_acc = next(m for m in metrics if m.metric == "accuracy" and m.slice == "overall")
    power = power_analysis(
        base_cases, overall_acc.baseline,
        discordance=(discordant / n_pairs) if n_pairs else None, **kw,
    )
    return Diff(
        baseline_config=baseline.config_version,
        candidate_config=candidate.config_version,
        baseline_grader_version=baseline.grader_version,
        candidate_grader_version=candidate.grader_version,
        baseline_snapshot_id=baseline.snapshot_id,
        candidate_snapshot_id=candidate.snapshot_id,
        baseline_policy_version=baseline.policy_version,
        candidate_policy_version=candidate.policy_version,
        rebased=bool(problems),
        n_paired_cases=len(paired_ids),
        only_in_baseline=sorted(base_by.keys() - cand_by.keys()),
        only_in_candidate=sorted(cand_by.keys() - base_by.keys()),
        newly_failing=newly_failing,
        newly_passing=newly_passing,
        still_failing=still_failing,
        metrics=metrics,
        mcnemar=McNemar(pass_to_fail=b_to_f, fail_to_pass=f_to_p, n_paired=n_pairs,
                        p_value=stats.mcnemar_exact(b_to_f, f_to_p)),
        histogram_shift=shift,
        power=power,
        cases=changes,
        bootstrap_seed=seed,
        bootstrap_resamples=resamples,
        min_clusters=min_clusters,
        notes=notes,
    )
