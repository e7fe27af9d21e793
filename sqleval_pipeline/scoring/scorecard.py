"""The scorecard of one configuration version (docs/grading.md).

Definitions (per attempt, ERROR attempts and ungraded attempts excluded everywhere except the
error count):

- *answerable attempts*: attempts on cases of band ``answerable`` or ``needs_definition``;
- **accuracy** = (CORRECT + CORRECT_FACTS) / answerable attempts (got-the-facts);
- **strict accuracy** = CORRECT / answerable attempts (exact);
- answered accuracy = (CORRECT + CORRECT_FACTS) / answerable attempts not declined;
- **deferral rate** = declined attempts (DEFERRED_*) / all graded attempts;
- **over-refusal rate** = DEFERRED_WRONGLY / answerable attempts;
- **refusal hold** = DEFERRED_CORRECTLY / should-refuse attempts;
- **mean over runs**: the mean of per-run accuracies; **spread**: best − worst run;
- **case-flip rate**: share of cases with ≥ 2 graded runs whose outcomes are not identical.

A rate over nothing is None. Intervals are 95%, seeded and reproducible, and never overclaim
(:mod:`sqleval_pipeline.scoring.stats`): a cluster bootstrap with at least
``stats.MIN_CLUSTERS`` clusters (the cases' ``cluster``), the wider of the case and the cluster
bootstrap with fewer, a case bootstrap with one, and Wilson when the bootstrap is degenerate.
Every :class:`Interval` records its ``method``. Slices: split, band, difficulty, each facet
(``by_facet``) and each tag (``by_tag``).

Given the attempts (and the configuration's price table), ``usage`` holds latency, tokens and
cost per question — per attempt, over the attempts with the value recorded (:mod:`.usage`).

>>> from sqleval_pipeline.pipeline.records import Grade
>>> def g(case, run, outcome, band="answerable"):
...     return Grade(config_version="c1", case_id=case, run_index=run, outcome=outcome,
...                  reason="x", grader_version="r1", band=band, difficulty="top_k",
...                  split="dev", cluster="orders")
>>> sc = build_scorecard([g("q1", 0, "CORRECT"), g("q1", 1, "WRONG"),
...                       g("q2", 0, "CORRECT_FACTS"), g("q2", 1, "CORRECT_FACTS")])
>>> sc.overall.accuracy.value, sc.overall.strict_accuracy.value, sc.case_flip_rate.value
(0.75, 0.25, 0.5)
>>> sc.overall.accuracy.ci.method
'case bootstrap (2 cases; 1 cluster < 20)'
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from sqleval_pipeline.configs import Pricing
from sqleval_pipeline.golden.model import BANDS, DIFFICULTIES, SPLITS
from sqleval_pipeline.pipeline.records import Attempt, Diagnosis, Grade
from sqleval_pipeline.scoring import stats
from sqleval_pipeline.scoring.usage import AttemptUsage, UsageMetrics, read_attempt_usage, usage_metrics
from sqleval_pipeline.errors import InputError
from sqleval_pipeline.scoring.models import (  # noqa: F401 (the scorecard's data, public here too)
    SuiteSummary,
    VendorRows,
    vendor_rows_summary,
    SCORECARD_SCHEMA,
    POWER_DELTAS,
    ANSWERABLE_BANDS,
    PRIMARY_JUDGE,
    METHOD_TAGS,
    GRADE_HINT,
    MAX_SLICE_VALUES,
    MAX_FACETS,
    METRICS,
    Interval,
    Rate,
    RunMetric,
    SliceMetrics,
    RefusalMetrics,
    ErrorMetrics,
    ExecutionOnly,
    PowerRow,
    PowerAnalysis,
    BootstrapSpec,
    CaseResult,
    Scorecard,
    _counts_of,
    case_counts,
    method_legend,
    outcome_counts,
)

# --------------------------------------------------------------------------- counting


def cluster_sums(cases: Sequence[CaseResult], metric: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Per-cluster numerator and denominator sums of a metric (clusters sorted by name)."""
    num_k, den_k = METRICS[metric]
    num: dict[str, int] = defaultdict(int)
    den: dict[str, int] = defaultdict(int)
    for c in cases:
        cnt = c.counts()
        num[c.cluster] += cnt[num_k]
        den[c.cluster] += cnt[den_k]
    names = sorted(den)
    return names, np.array([num[n] for n in names], float), np.array([den[n] for n in names], float)


def rate(cases: Sequence[CaseResult], metric: str, *, seed: int, resamples: int, with_ci: bool = True,
         min_clusters: int = stats.MIN_CLUSTERS) -> Rate:
    """A metric over ``cases`` with its interval (the rule of :mod:`.stats`: the method is in
    ``ci.method``)."""
    num_k, den_k = METRICS[metric]
    counts = [c.counts() for c in cases]
    num = [cnt[num_k] for cnt in counts]
    den = [cnt[den_k] for cnt in counts]
    n, d = sum(num), sum(den)
    value = None if d == 0 else n / d
    ci = None
    if with_ci and d > 0:
        ci = Interval.of(stats.ratio_interval(num, den, [c.cluster for c in cases], resamples=resamples,
                                              seed=seed, min_clusters=min_clusters))
    return Rate(value=value, num=n, den=d, ci=ci)


def _slice(cases: Sequence[CaseResult], runs: Sequence[int], *, seed: int, resamples: int,
           min_clusters: int = stats.MIN_CLUSTERS) -> SliceMetrics:
    per_run = []
    for r in runs:
        num = den = ex = 0
        for c in cases:
            if r in c.runs:
                cnt = outcome_counts(c.band, c.outcomes[c.runs.index(r)])
                num += cnt["facts"]
                ex += cnt["exact"]
                den += cnt["answerable"]
        per_run.append(RunMetric(
            run_index=r, accuracy=None if den == 0 else num / den,
            strict_accuracy=None if den == 0 else ex / den, n_attempts=den,
        ))
    accs = [p.accuracy for p in per_run if p.accuracy is not None]
    stricts = [p.strict_accuracy for p in per_run if p.strict_accuracy is not None]
    kw = {"seed": seed, "resamples": resamples, "min_clusters": min_clusters}
    acc = rate(cases, "accuracy", **kw)
    return SliceMetrics(
        n_cases=len(cases),
        n_clusters=len({c.cluster for c in cases}),
        n_attempts=acc.den,
        accuracy=acc,
        strict_accuracy=rate(cases, "strict_accuracy", **kw),
        answered_accuracy=rate(cases, "answered_accuracy", **kw),
        per_run=per_run,
        mean_over_runs=float(np.mean(accs)) if accs else None,
        strict_mean_over_runs=float(np.mean(stricts)) if stricts else None,
        spread=(max(accs) - min(accs)) if accs else None,
        strict_spread=(max(stricts) - min(stricts)) if stricts else None,
    )


def power_analysis(
    cases: Sequence[CaseResult],
    accuracy: float | None,
    *,
    discordance: float | None = None,
    seed: int = stats.DEFAULT_SEED,
    resamples: int = stats.DEFAULT_RESAMPLES,
    min_clusters: int = stats.MIN_CLUSTERS,
) -> PowerAnalysis:
    """Cases needed for 3/5/10-point paired differences (observed discordance or 2p(1-p)),
    clustered by the design effect of :func:`stats.design_effect` (its method recorded)."""
    answerable = [c for c in cases if c.band in ANSWERABLE_BANDS and c.counts()["answerable"] > 0]
    if discordance is None:
        p = 0.5 if accuracy is None else accuracy
        p_d, source = 2 * p * (1 - p), f"default 2p(1-p) at p={p:.3f}"
        if p_d <= 0:
            p_d, source = 0.5, "default 0.5 (observed accuracy is 0 or 1)"
    else:
        p_d, source = discordance, "observed discordance between the paired configurations"
    # design effect: clustered vs per-case variance of the accuracy (never from a bootstrap
    # over a single cluster, whose variance is 0)
    deff, deff_method, n_clusters = stats.design_effect(
        [c.counts()["facts"] for c in answerable], [c.counts()["answerable"] for c in answerable],
        [c.cluster for c in answerable], resamples=resamples, seed=seed, min_clusters=min_clusters)
    rows = []
    for d in POWER_DELTAS:
        n = stats.cases_needed(d, p_d)
        rows.append(PowerRow(difference_points=round(d * 100), cases_needed=n,
                             cases_needed_clustered=int(np.ceil(n * deff))))
    n_cases = len(answerable)
    able = [r.difference_points for r in rows if r.cases_needed_clustered <= n_cases]
    if able:
        verdict = f"{n_cases} answerable cases can detect paired differences of {min(able)} points or more"
    else:
        verdict = (
            f"diagnostic only: {n_cases} answerable cases cannot rank configurations "
            f"(a 10-point difference needs about {rows[-1].cases_needed_clustered})"
        )
    return PowerAnalysis(discordance=p_d, discordance_source=source, design_effect=round(deff, 4),
                         design_effect_method=deff_method, n_clusters=n_clusters,
                         n_cases=n_cases, rows=rows, verdict=verdict)


# --------------------------------------------------------------------------- building


def case_results(grades: Sequence[Grade], diagnoses: Sequence[Diagnosis] = ()) -> list[CaseResult]:
    """Group grades per case, ordered by case id and run index."""
    by_case: dict[str, list[Grade]] = defaultdict(list)
    seen: set[tuple[str, str, int]] = set()
    for g in grades:
        if g.key in seen:
            raise InputError(f"duplicate grade for attempt {g.key}")
        seen.add(g.key)
        by_case[g.case_id].append(g)
    diag = _primary_diagnoses(diagnoses)
    out = []
    for cid in sorted(by_case):
        gs = sorted(by_case[cid], key=lambda g: g.run_index)
        first = gs[0]
        for g in gs[1:]:
            if (g.band, g.difficulty, g.split, g.cluster) != (first.band, first.difficulty, first.split, first.cluster):
                raise InputError(f"case {cid!r}: grades disagree on band/difficulty/split/cluster")
        cats = [diag[g.key] for g in gs if g.key in diag and g.outcome in ("WRONG", "DEFERRED_WRONGLY")]
        out.append(CaseResult(
            case_id=cid, band=first.band, difficulty=first.difficulty, split=first.split,
            cluster=first.cluster, case_status=first.case_status, runs=[g.run_index for g in gs],
            outcomes=[g.outcome for g in gs], reasons=[g.reason for g in gs], failure_categories=cats,
            facets=dict(first.facets), tags=list(first.tags), inferred=list(first.inferred),
        ))
    return out


def _primary_diagnoses(diagnoses: Sequence[Diagnosis]) -> dict[tuple[str, str, int], str]:
    judges = sorted({d.judge for d in diagnoses})
    if not judges:
        return {}
    judge = PRIMARY_JUDGE if PRIMARY_JUDGE in judges else judges[0]
    return {d.key: d.category for d in diagnoses if d.judge == judge}


def _top(groups: dict[str, list[CaseResult]], limit: int) -> tuple[list[str], int]:
    """The ``limit`` names with most cases (ties by name), and how many were left out."""
    names = sorted(groups, key=lambda k: (-len(groups[k]), k))
    return names[:limit], max(0, len(names) - limit)


def _named_slices(cases: Sequence[CaseResult], runs: Sequence[int], **kw
                  ) -> tuple[dict[str, dict[str, SliceMetrics]], dict[str, SliceMetrics], dict[str, int]]:
    """``by_facet``, ``by_tag`` and what was left out: at most :data:`MAX_FACETS` facets (most
    cases first) and :data:`MAX_SLICE_VALUES` values per facet and tags, so the work stays
    bounded whatever the number of tags (each case is indexed once per tag)."""
    facets: dict[str, dict[str, list[CaseResult]]] = defaultdict(lambda: defaultdict(list))
    tags: dict[str, list[CaseResult]] = defaultdict(list)
    for c in cases:
        for name, value in c.facets.items():
            facets[name][value].append(c)
        for t in dict.fromkeys(c.tags):
            tags[t].append(c)
    omitted: dict[str, int] = {}
    facet_sizes = {f: [c for vs in values.values() for c in vs] for f, values in facets.items()}
    kept_facets, n_out = _top(facet_sizes, MAX_FACETS)
    if n_out:
        omitted["facets"] = n_out
    by_facet: dict[str, dict[str, SliceMetrics]] = {}
    for f in sorted(kept_facets):
        values, n_out = _top(facets[f], MAX_SLICE_VALUES)
        if n_out:
            omitted[f"facet:{f}"] = n_out
        by_facet[f] = {v: _slice(facets[f][v], runs, **kw) for v in values}
    kept_tags, n_out = _top(tags, MAX_SLICE_VALUES)
    if n_out:
        omitted["tags"] = n_out
    by_tag = {t: _slice(tags[t], runs, **kw) for t in kept_tags}
    return by_facet, by_tag, omitted


def ranked(slices: dict[str, SliceMetrics]) -> list[tuple[str, SliceMetrics]]:
    """Slices with most cases first (ties by name): the order renderings list them in."""
    return sorted(slices.items(), key=lambda kv: (-kv[1].n_cases, kv[0]))


def suite_summary(grades: Sequence[Grade], overall: SliceMetrics, **kw) -> SuiteSummary | None:
    """Suite accuracy (the scorecard's) beside the accuracy the pinned snapshot alone gives:
    the same grades with each accidental match restored to its snapshot outcome. None when
    the grades were not checked on a suite (grader version without ``+suite-``)."""
    version = grades[0].grader_version if grades else ""
    if "+suite-" not in version:
        return None
    on_snapshot = [g.model_copy(update={"outcome": g.snapshot_outcome}) if g.snapshot_outcome else g
                   for g in grades]
    snap = rate([c for c in case_results(on_snapshot) if any(o is not None for o in c.outcomes)], "accuracy", **kw)
    accidental = [g for g in grades if g.suite_check == "accidental_match"]
    return SuiteSummary(
        suite=version.split("+suite-", 1)[1], snapshot_accuracy=snap, suite_accuracy=overall.accuracy,
        n_checked=sum(g.suite_check in ("passed", "accidental_match", "inconclusive") for g in grades),
        n_accidental=len(accidental), accidental_cases=sorted({g.case_id for g in accidental}),
        n_no_suite=sum(g.suite_check == "no_suite" for g in grades),
        n_inconclusive=sum(g.suite_check == "inconclusive" for g in grades))


def build_scorecard(
    grades: Sequence[Grade],
    diagnoses: Sequence[Diagnosis] = (),
    *,
    config_version: str | None = None,
    tuned: bool = False,
    tuned_heldout: bool = False,
    label: str | None = None,
    seed: int = stats.DEFAULT_SEED,
    resamples: int = stats.DEFAULT_RESAMPLES,
    min_clusters: int = stats.MIN_CLUSTERS,
    attempts: Iterable[Attempt | AttemptUsage] | str | os.PathLike[str] | None = None,
    pricing: Pricing | None = None,
) -> Scorecard:
    """Compute the scorecard of one configuration version from its grades (+ diagnoses).

    ``config_version`` selects one configuration when ``grades`` hold several. Raises
    ValueError on mixed grader versions or snapshots (re-grade first: mixing them mixes metrics).
    ``min_clusters``: fewest clusters for a plain cluster bootstrap (:data:`stats.MIN_CLUSTERS`).
    ``attempts`` (records, or the batch's attempts file) give latency and tokens per question,
    and with ``pricing`` (the configuration's price table) cost per question
    (:mod:`.usage`); only the attempts the grades grade count. Without them ``usage`` is None.
    """
    versions = sorted({g.config_version for g in grades})
    if config_version is None:
        if len(versions) != 1:
            raise InputError(f"grades hold {len(versions)} configuration versions {versions}: pick one")
        config_version = versions[0]
    grades = [g for g in grades if g.config_version == config_version]
    if not grades:
        raise InputError(f"no grades for configuration version {config_version!r}")
    gv = sorted({g.grader_version for g in grades})
    if len(gv) != 1:
        raise InputError(f"grades were made by several grader versions {gv}: re-grade them with one")
    snaps = sorted({g.snapshot_id for g in grades if g.snapshot_id})
    if len(snaps) > 1:
        raise InputError(f"grades span several snapshots {snaps}: a scorecard measures one snapshot")
    notes: list[str] = []
    diagnoses = [d for d in diagnoses if d.config_version == config_version]
    cases = case_results(grades, diagnoses)
    graded_cases = [c for c in cases if any(o is not None for o in c.outcomes)]
    runs = sorted({r for c in cases for r in c.runs})
    if min_clusters < 2:
        raise InputError(f"min_clusters must be at least 2 (a bootstrap over one cluster is degenerate), "
                         f"got {min_clusters}")
    kw = {"seed": seed, "resamples": resamples, "min_clusters": min_clusters}

    def sl(pred) -> SliceMetrics:
        return _slice([c for c in graded_cases if pred(c)], runs, **kw)

    overall = _slice(graded_cases, runs, **kw)
    order = [*DIFFICULTIES, *sorted({c.difficulty for c in graded_cases} - set(DIFFICULTIES))]
    by_difficulty = {d: sl(lambda c, d=d: c.difficulty == d) for d in order
                     if any(c.difficulty == d for c in graded_cases)}
    by_band = {b: sl(lambda c, b=b: c.band == b) for b in BANDS if any(c.band == b for c in graded_cases)}
    by_split = {s: sl(lambda c, s=s: c.split == s) for s in SPLITS}
    by_facet, by_tag, omitted = _named_slices(graded_cases, runs, **kw)
    for what, n in omitted.items():
        label = {"facets": "facet(s)", "tags": "tag(s)"}.get(what, f"value(s) of {what}")
        notes.append(f"{n} {label} not sliced: a scorecard computes the {MAX_SLICE_VALUES} slices "
                     f"with the most cases per facet and for tags, and at most {MAX_FACETS} facets")
    if by_split["heldout"].n_cases == 0:
        notes.append("no held-out cases: every accuracy here is a dev-set number")
    if tuned:
        notes.append("tuned: measured after tuning on these same cases; not an estimate of new-question accuracy")
    if tuned_heldout:
        notes.append("held-out tuned: the held-out cases were read while the system was tuned; "
                     "its held-out accuracy is not a blind estimate (add fresh held-out cases)")
    if len(runs) < 3:
        notes.append(f"only {len(runs)} run(s): at least 3 are required (mean, spread and flip rate need them)")
    incomplete = [c.case_id for c in cases if len(c.runs) != len(runs)]
    if incomplete:
        notes.append(f"{len(incomplete)} case(s) miss some runs, e.g. {incomplete[:3]}")

    errors = Counter(reason for c in cases for o, reason in zip(c.outcomes, c.reasons, strict=True) if o == "ERROR")
    flips = [c.flipped for c in graded_cases if c.flipped is not None]
    flip_rate = Rate(value=(sum(flips) / len(flips)) if flips else None, num=sum(flips), den=len(flips))

    derived = sum(1 for c in graded_cases if c.cluster_derived)
    ungraded = [(c, i) for c in cases for i, o in enumerate(c.outcomes) if o is None]
    exec_cases = {c.case_id for c, _ in ungraded}
    exec_ok = sum(1 for c, i in ungraded if c.reasons[i] == "unverified_execution_only")
    execution_only = ExecutionOnly(
        n_cases=len(exec_cases), n_attempts=len(ungraded),
        executed_ok=Rate(value=(exec_ok / len(ungraded)) if ungraded else None, num=exec_ok, den=len(ungraded)),
    )

    histogram = None
    judge = None
    diagnosed = None
    failures = sum(1 for c in graded_cases for o in c.outcomes if o in ("WRONG", "DEFERRED_WRONGLY"))
    if diagnoses:
        judges = sorted({d.judge for d in diagnoses})
        judge = PRIMARY_JUDGE if PRIMARY_JUDGE in judges else judges[0]
        cats = Counter(cat for c in graded_cases for cat in c.failure_categories)
        histogram = {k: cats[k] for k in sorted(cats)}
        n_diag = sum(cats.values())
        diagnosed = Rate(value=(n_diag / failures) if failures else None, num=n_diag, den=failures)
        if failures and n_diag < failures:
            notes.append(f"{failures - n_diag} failed attempt(s) have no diagnosis from judge {judge!r}")

    guard_blocked = sum(
        1 for c in graded_cases for o, r in zip(c.outcomes, c.reasons, strict=True)
        if o == "WRONG" and r.startswith("answered_should_refuse:guard_blocked")
    )
    n_clusters = len({c.cluster for c in graded_cases})
    usage: UsageMetrics | None = None
    if attempts is not None:
        if isinstance(attempts, (str, os.PathLike)):
            attempts = read_attempt_usage(Path(attempts))
        usage = usage_metrics(attempts, pricing, keys={g.key for g in grades})
    return Scorecard(
        config_version=config_version,
        grader_version=gv[0],
        snapshot_id=snaps[0] if snaps else None,
        tuned=tuned,
        tuned_heldout=tuned_heldout,
        label=label,
        runs=runs,
        n_cases=len(cases),
        n_attempts=len(grades),
        overall=overall,
        by_difficulty=by_difficulty,
        by_band=by_band,
        by_split=by_split,
        by_facet=by_facet,
        by_tag=by_tag,
        slices_omitted=omitted,
        clusters_derived=derived,
        refusal=RefusalMetrics(
            deferral_rate=rate(graded_cases, "deferral_rate", **kw),
            over_refusal_rate=rate(graded_cases, "over_refusal_rate", **kw),
            refusal_hold=rate(graded_cases, "refusal_hold", **kw),
            should_refuse_guard_blocked=guard_blocked,
        ),
        errors=ErrorMetrics(count=sum(errors.values()), by_reason=dict(sorted(errors.items()))),
        case_flip_rate=flip_rate,
        execution_only=execution_only,
        power=power_analysis(graded_cases, overall.accuracy.value, **kw),
        failure_histogram=histogram,
        failure_histogram_judge=judge,
        failures_diagnosed=diagnosed,
        usage=usage,
        vendor_rows=vendor_rows_summary(grades),
        test_suite=suite_summary(grades, overall, **kw),
        bootstrap=BootstrapSpec(
            method=(f"percentile bootstrap: clusters with at least {min_clusters} clusters, else the "
                    "wider of cases and clusters (cases alone with one cluster); Wilson or an exact "
                    "bound when degenerate"),
            unit="case cluster, or case", resamples=resamples, seed=seed, n_clusters=n_clusters,
            min_clusters=min_clusters),
        cases=cases,
        notes=notes,
    )


# --------------------------------------------------------------------------- calibrated refusal


class CalibratedRefusal(BaseModel):
    """Accuracy of the more permissive configuration on the cases the stricter one declined."""

    strict_config: str
    permissive_config: str
    declined_cases: list[str]
    permissive_accuracy_on_declined: Rate
    permissive_overall_accuracy: Rate
    gap: float | None
    verdict: str


def calibrated_refusal(a: Scorecard, b: Scorecard, *, strict: str | None = None) -> CalibratedRefusal:
    """Calibrated refusal (docs/grading.md) for two configurations (the stricter defers more by default).

    A case counts as declined by the strict configuration when most of its graded runs on an
    answerable case were DEFERRED_WRONGLY.
    """
    if strict is None:
        ra, rb = a.refusal.deferral_rate.value or 0.0, b.refusal.deferral_rate.value or 0.0
        strict_sc, perm_sc = (a, b) if ra >= rb else (b, a)
    elif strict == a.config_version:
        strict_sc, perm_sc = a, b
    elif strict == b.config_version:
        strict_sc, perm_sc = b, a
    else:
        raise InputError(f"strict must be one of {a.config_version!r}, {b.config_version!r}")
    declined = sorted(
        c.case_id for c in strict_sc.cases
        if c.band in ANSWERABLE_BANDS and c.graded and c.outcomes.count("DEFERRED_WRONGLY") * 2 > c.graded
    )
    perm_cases = [c for c in perm_sc.cases if c.outcomes and any(o is not None for o in c.outcomes)]
    declined_set = set(declined)
    on_declined = rate([c for c in perm_cases if c.case_id in declined_set], "accuracy", seed=0,
                       resamples=0, with_ci=False)
    overall = rate(perm_cases, "accuracy", seed=0, resamples=0, with_ci=False)
    gap = None
    if on_declined.value is not None and overall.value is not None:
        gap = on_declined.value - overall.value
    if gap is None:
        verdict = "not measurable: the strict configuration declined no answerable case the permissive one answered"
    elif gap < 0:
        verdict = (f"refusals earn their keep: the permissive configuration is {abs(gap) * 100:.1f} points less "
                   "accurate on the declined cases than overall")
    else:
        verdict = (f"over-cautious: the permissive configuration is {gap * 100:.1f} points at least as accurate on the "
                   "declined cases as overall; the strict one pays in coverage")
    return CalibratedRefusal(
        strict_config=strict_sc.config_version, permissive_config=perm_sc.config_version,
        declined_cases=declined, permissive_accuracy_on_declined=on_declined,
        permissive_overall_accuracy=overall, gap=gap, verdict=verdict,
    )


def load_scorecard(path: str | os.PathLike[str]) -> Scorecard:
    return Scorecard.load(path)
