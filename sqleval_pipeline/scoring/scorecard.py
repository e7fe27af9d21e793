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

>>> from sqleval_pipeline.records import Grade
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

import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from sqleval_pipeline.golden.model import BANDS, DIFFICULTIES, SPLITS
from sqleval_pipeline.records import Diagnosis, Grade
from sqleval_pipeline.scoring import stats
from sqleval_pipeline.textfiles import write_atomically
from sqleval_pipeline.store import INCONCLUSIVE_ERROR_SHARE

SCORECARD_SCHEMA = "sqleval.scorecard/1"
POWER_DELTAS = (0.03, 0.05, 0.10)
ANSWERABLE_BANDS = frozenset({"answerable", "needs_definition"})
PRIMARY_JUDGE = "rules"


#: interval kind -> (the tag printed next to an interval, what it means)
METHOD_TAGS: dict[str, tuple[str, str]] = {
    "cluster": ("cluster-bs", f"percentile cluster bootstrap (at least {stats.MIN_CLUSTERS} clusters)"),
    "wider": ("wider-bs", f"the wider of the case and the cluster bootstrap (2 to "
              f"{stats.MIN_CLUSTERS - 1} clusters: too few for the cluster bootstrap alone)"),
    "case": ("case-bs", "percentile case bootstrap, each case's runs kept together (one cluster)"),
    "wilson": ("Wilson", "Wilson score interval with n = the cases (the bootstrap was degenerate: "
               "every case alike, e.g. all correct)"),
    "exact": ("exact", "exact bound on the share of paired cases that could differ (the paired "
              "bootstrap was degenerate, e.g. no discordant case)"),
}
#: how to get execution-only cases graded (docs/golden-set.md)
GRADE_HINT = ("to grade them, review them with `sqleval golden review --reviewer NAME` (accepting "
              "a case freezes its expected result and marks it verified), or import references "
              "that were already reviewed with `sqleval golden import FILE --reviewer NAME`; then "
              "run the configuration again")
#: slices computed per facet and for tags (the ones with most cases; the rest are counted in
#: ``Scorecard.slices_omitted``): a set with thousands of tags stays fast
MAX_SLICE_VALUES = 50
MAX_FACETS = 20


class Interval(BaseModel):
    """A 95% interval and how it was obtained. ``kind`` selects the tag renderings print next
    to it (:data:`METHOD_TAGS`); scorecards written before methods were recorded load as
    ``cluster bootstrap``, which is what they used."""

    low: float | None
    high: float | None
    method: str = "cluster bootstrap"
    kind: str = "cluster"
    n_clusters: int | None = None
    n_cases: int | None = None

    @property
    def tag(self) -> str:
        return METHOD_TAGS.get(self.kind, (self.kind, ""))[0]

    @classmethod
    def of(cls, e: stats.Estimate) -> Interval:
        return cls(low=e.low, high=e.high, method=e.method, kind=e.kind, n_clusters=e.n_clusters,
                   n_cases=e.n_cases)


class Rate(BaseModel):
    """``value = num / den`` (None when ``den == 0``) with an optional interval."""

    value: float | None
    num: int
    den: int
    ci: Interval | None = None


class RunMetric(BaseModel):
    run_index: int
    accuracy: float | None
    strict_accuracy: float | None
    n_attempts: int


class SliceMetrics(BaseModel):
    n_cases: int
    n_clusters: int | None = Field(None, description="distinct clusters among the slice's cases")
    n_attempts: int = Field(description="answerable, graded, non-error attempts")
    accuracy: Rate
    strict_accuracy: Rate
    answered_accuracy: Rate
    per_run: list[RunMetric]
    mean_over_runs: float | None
    strict_mean_over_runs: float | None
    spread: float | None
    strict_spread: float | None


class RefusalMetrics(BaseModel):
    deferral_rate: Rate
    over_refusal_rate: Rate
    refusal_hold: Rate
    should_refuse_guard_blocked: int = Field(
        description="should-refuse attempts the system answered and the guard then blocked (graded WRONG)"
    )


class ErrorMetrics(BaseModel):
    count: int
    by_reason: dict[str, int]


class ExecutionOnly(BaseModel):
    """Cases without a frozen expected result (unverified / generated): executions only."""

    n_cases: int
    n_attempts: int
    executed_ok: Rate


class PowerRow(BaseModel):
    difference_points: int
    cases_needed: int
    cases_needed_clustered: int


class PowerAnalysis(BaseModel):
    alpha: float = 0.05
    power: float = 0.8
    discordance: float
    discordance_source: str
    design_effect: float
    design_effect_method: str = Field("cluster/case bootstrap variance ratio",
                                      description="how the design effect was obtained")
    n_clusters: int | None = None
    n_cases: int
    rows: list[PowerRow]
    formula: str = stats.POWER_FORMULA
    verdict: str


class BootstrapSpec(BaseModel):
    method: str = "cluster bootstrap, percentile"
    unit: str = "case cluster"
    resamples: int
    seed: int
    level: float = stats.LEVEL
    n_clusters: int
    #: fewest clusters for a plain cluster bootstrap (None: written before the rule existed)
    min_clusters: int | None = None


class CaseResult(BaseModel):
    """Per-case outcomes across runs (ordered by run index)."""

    case_id: str
    band: str
    difficulty: str
    split: str
    cluster: str
    case_status: str
    runs: list[int]
    outcomes: list[str | None]
    reasons: list[str]
    failure_categories: list[str] = Field(default_factory=list)
    facets: dict[str, str] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    #: metadata sqleval inferred for the case (``cluster``: derived, not declared)
    inferred: list[str] = Field(default_factory=list)

    @property
    def cluster_derived(self) -> bool:
        return "cluster" in self.inferred

    def counts(self) -> dict[str, int]:
        """This case's numerators and denominators (read-only: shared by every case with the
        same band and outcomes, computed once)."""
        return _counts_of(self.band, tuple(self.outcomes))

    @property
    def graded(self) -> int:
        return sum(1 for o in self.outcomes if o is not None and o != "ERROR")

    @property
    def successes(self) -> int:
        return sum(1 for o in self.outcomes if o in ("CORRECT", "CORRECT_FACTS", "DEFERRED_CORRECTLY"))

    @property
    def passed(self) -> bool | None:
        """Majority verdict: more than half of the graded runs succeeded (None: none graded)."""
        g = self.graded
        return None if g == 0 else self.successes * 2 > g

    @property
    def flipped(self) -> bool | None:
        graded = [o for o in self.outcomes if o is not None and o != "ERROR"]
        return None if len(graded) < 2 else len(set(graded)) > 1


class Scorecard(BaseModel):
    schema_version: str = SCORECARD_SCHEMA
    config_version: str
    grader_version: str
    snapshot_id: str | None
    #: the guard policy the executions were made under (None: not recorded)
    policy_version: str | None = None
    tuned: bool = Field(description="measured after tuning on these same cases")
    tuned_heldout: bool = Field(False, description="the held-out split was read while the system "
                                "was tuned: its accuracy is not a blind estimate either")
    label: str | None = None
    runs: list[int]
    n_cases: int
    n_attempts: int
    overall: SliceMetrics
    by_difficulty: dict[str, SliceMetrics]
    by_band: dict[str, SliceMetrics]
    by_split: dict[str, SliceMetrics]
    #: facet name -> value -> metrics (e.g. by_facet["database"]["flight_2"])
    by_facet: dict[str, dict[str, SliceMetrics]] = Field(default_factory=dict)
    by_tag: dict[str, SliceMetrics] = Field(default_factory=dict)
    #: slices not computed ("tags", "facet:<name>", "facets" -> how many), MAX_SLICE_VALUES
    slices_omitted: dict[str, int] = Field(default_factory=dict)
    #: graded cases whose cluster sqleval derived (the reference's main table, a benchmark's
    #: database) instead of reading it from the source
    clusters_derived: int = 0
    refusal: RefusalMetrics
    errors: ErrorMetrics
    case_flip_rate: Rate
    execution_only: ExecutionOnly
    power: PowerAnalysis
    failure_histogram: dict[str, int] | None = None
    failure_histogram_judge: str | None = None
    #: how far that judge's categories can be trusted: its calibration against human labels
    #: when the scorecard was built ("calibrated: …", "uncalibrated (n < 20): …", "no labels")
    failure_histogram_calibration: str | None = None
    failures_diagnosed: Rate | None = None
    bootstrap: BootstrapSpec
    cases: list[CaseResult]
    notes: list[str] = Field(default_factory=list)

    @property
    def attempts_total(self) -> int:
        """Every graded attempt, errors included (all bands and statuses)."""
        return sum(sum(o is not None for o in c.outcomes) for c in self.cases)

    @property
    def error_share(self) -> float | None:
        """Share of the attempts that got no answer (ERROR: provider outage, harness fault);
        None over no attempt."""
        total = self.attempts_total
        return self.errors.count / total if total else None

    @property
    def inconclusive(self) -> bool:
        """More than :data:`INCONCLUSIVE_ERROR_SHARE` of the attempts are ERROR: not a
        measurement of the system (docs/configurations.md, regression gate)."""
        share = self.error_share
        return share is not None and share > INCONCLUSIVE_ERROR_SHARE

    def to_json(self) -> str:
        """Stable JSON (sorted keys, two-space indent)."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    def graded_cases(self) -> int:
        """Cases with at least one graded attempt."""
        return sum(1 for c in self.cases if any(o is not None for o in c.outcomes))

    def intervals(self) -> list[Interval]:
        """Every interval of the scorecard (slices, refusal rates)."""
        slices = [self.overall, *self.by_split.values(), *self.by_band.values(),
                  *self.by_difficulty.values(), *self.by_tag.values(),
                  *(m for values in self.by_facet.values() for m in values.values())]
        rates = [r for m in slices for r in (m.accuracy, m.strict_accuracy, m.answered_accuracy)]
        rates += [self.refusal.deferral_rate, self.refusal.over_refusal_rate, self.refusal.refusal_hold]
        return [r.ci for r in rates if r.ci is not None and r.ci.low is not None]

    def interval_legend(self) -> list[str]:
        """``tag: meaning`` for each interval method the scorecard uses, the overall accuracy's
        full method first."""
        legend = method_legend(self.intervals(), self.overall.accuracy.ci)
        if self.bootstrap.min_clusters is None:  # written before intervals named their method
            n = self.bootstrap.n_clusters
            legend.append(f"this scorecard predates the interval rule: every interval is a cluster "
                          f"bootstrap over its {n} cluster{'' if n == 1 else 's'}, however few (a "
                          "single cluster gives zero width); rebuild it with `sqleval scorecard` "
                          "for intervals that never overclaim")
        return legend

    def cluster_note(self) -> str:
        """How many clusters, and whether sqleval derived them."""
        n = self.bootstrap.n_clusters
        text = f"{n} cluster{'' if n == 1 else 's'}"
        if self.clusters_derived:
            text += (f"; clusters derived by sqleval (the reference's main table, or the "
                     f"benchmark's database) for {self.clusters_derived} of "
                     f"{self.graded_cases()} graded cases, not declared by the source")
        return text

    def execution_only_note(self) -> str | None:
        """How many cases are execution-only and how to get them graded (None: none)."""
        x = self.execution_only
        if not x.n_cases:
            return None
        head = (f"{x.n_cases} execution-only case(s) ({x.n_attempts} attempts, status unverified "
                "or generated: no frozen expected result) count in no accuracy")
        if not self.graded_cases():
            head += " (no case is graded yet, so every accuracy here is n/a)"
        return f"{head}; {GRADE_HINT}"

    @classmethod
    def from_json(cls, text: str) -> Scorecard:
        data = json.loads(text)
        if data.get("schema_version") != SCORECARD_SCHEMA:
            raise ValueError(
                f"unsupported scorecard schema {data.get('schema_version')!r} (expected {SCORECARD_SCHEMA})"
            )
        return cls.model_validate(data)

    def save(self, path: str | os.PathLike[str]) -> Path:
        p = Path(path)
        write_atomically(p, self.to_json())  # a crash never leaves half a file
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Scorecard:
        return cls.from_json(Path(path).read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- counting


@lru_cache(maxsize=8192)
def _counts_of(band: str, outcomes: tuple[str | None, ...]) -> dict[str, int]:
    """:func:`case_counts`, remembered: a band with a few runs has few outcome patterns, and a
    scorecard reads every case's counts once per metric and slice. Read-only."""
    return case_counts(band, outcomes)


def outcome_counts(band: str, outcome: str | None) -> dict[str, int]:
    """:func:`case_counts` of one attempt; read-only."""
    return _counts_of(band, (outcome,))


def case_counts(band: str, outcomes: Iterable[str | None]) -> dict[str, int]:
    """Numerators and denominators contributed by one case's attempts."""
    c = Counter(o for o in outcomes if o is not None)
    answerable = band in ANSWERABLE_BANDS
    graded = sum(v for k, v in c.items() if k != "ERROR")
    facts = c["CORRECT"] + c["CORRECT_FACTS"]
    return {
        "graded": graded,
        "answerable": graded if answerable else 0,
        "answered": (graded - c["DEFERRED_WRONGLY"]) if answerable else 0,
        "facts": facts if answerable else 0,
        "exact": c["CORRECT"] if answerable else 0,
        "declined": c["DEFERRED_CORRECTLY"] + c["DEFERRED_WRONGLY"],
        "deferred_wrongly": c["DEFERRED_WRONGLY"] if answerable else 0,
        "should_refuse": graded if not answerable else 0,
        "deferred_correctly": c["DEFERRED_CORRECTLY"] if not answerable else 0,
        "errors": c["ERROR"],
    }


#: metric name -> (numerator, denominator) in :func:`case_counts`
METRICS: dict[str, tuple[str, str]] = {
    "accuracy": ("facts", "answerable"),
    "strict_accuracy": ("exact", "answerable"),
    "answered_accuracy": ("facts", "answered"),
    "deferral_rate": ("declined", "graded"),
    "over_refusal_rate": ("deferred_wrongly", "answerable"),
    "refusal_hold": ("deferred_correctly", "should_refuse"),
}


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


def method_legend(intervals: Iterable[Interval], headline: Interval | None = None) -> list[str]:
    """``tag: meaning`` for each kind among ``intervals`` (in :data:`METHOD_TAGS` order), the
    headline interval's own method string added to its line.

    >>> method_legend([Interval(low=0.1, high=0.9, method="case bootstrap (9 cases; 1 cluster < 20)",
    ...                         kind="case")])[0][:38]
    'case-bs = percentile case bootstrap, e'
    """
    kinds = {i.kind for i in intervals}
    if headline is not None:
        kinds.add(headline.kind)
    out = []
    for kind, (tag, meaning) in METHOD_TAGS.items():
        if kind in kinds:
            extra = (f"; overall accuracy: {headline.method}"
                     if headline is not None and headline.kind == kind else "")
            out.append(f"{tag} = {meaning}{extra}")
    out += [f"{k} = {k}" for k in sorted(kinds - METHOD_TAGS.keys())]
    return out


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
            raise ValueError(f"duplicate grade for attempt {g.key}")
        seen.add(g.key)
        by_case[g.case_id].append(g)
    diag = _primary_diagnoses(diagnoses)
    out = []
    for cid in sorted(by_case):
        gs = sorted(by_case[cid], key=lambda g: g.run_index)
        first = gs[0]
        for g in gs[1:]:
            if (g.band, g.difficulty, g.split, g.cluster) != (first.band, first.difficulty, first.split, first.cluster):
                raise ValueError(f"case {cid!r}: grades disagree on band/difficulty/split/cluster")
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
) -> Scorecard:
    """Compute the scorecard of one configuration version from its grades (+ diagnoses).

    ``config_version`` selects one configuration when ``grades`` hold several. Raises
    ValueError on mixed grader versions or snapshots (re-grade first: mixing them mixes metrics).
    ``min_clusters``: fewest clusters for a plain cluster bootstrap (:data:`stats.MIN_CLUSTERS`).
    """
    versions = sorted({g.config_version for g in grades})
    if config_version is None:
        if len(versions) != 1:
            raise ValueError(f"grades hold {len(versions)} configuration versions {versions}: pick one")
        config_version = versions[0]
    grades = [g for g in grades if g.config_version == config_version]
    if not grades:
        raise ValueError(f"no grades for configuration version {config_version!r}")
    gv = sorted({g.grader_version for g in grades})
    if len(gv) != 1:
        raise ValueError(f"grades were made by several grader versions {gv}: re-grade them with one")
    snaps = sorted({g.snapshot_id for g in grades if g.snapshot_id})
    if len(snaps) > 1:
        raise ValueError(f"grades span several snapshots {snaps}: a scorecard measures one snapshot")
    notes: list[str] = []
    diagnoses = [d for d in diagnoses if d.config_version == config_version]
    cases = case_results(grades, diagnoses)
    graded_cases = [c for c in cases if any(o is not None for o in c.outcomes)]
    runs = sorted({r for c in cases for r in c.runs})
    if min_clusters < 2:
        raise ValueError(f"min_clusters must be at least 2 (a bootstrap over one cluster is degenerate), "
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
        raise ValueError(f"strict must be one of {a.config_version!r}, {b.config_version!r}")
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
