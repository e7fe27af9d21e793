"""The scorecard's data (docs/grading.md): intervals with their method, rates, slices, refusal
and error counts, power, case results and :class:`Scorecard` itself (JSON schema
``sqleval.scorecard/1``), with the legend of interval methods. Built by
:func:`sqleval_pipeline.scoring.scorecard.build_scorecard`; the only computation here is what
one case's attempts count for (:func:`case_counts`)."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field

from sqleval_pipeline.scoring import stats
from sqleval_pipeline.scoring.usage import UsageMetrics
from sqleval_pipeline.pipeline.store import INCONCLUSIVE_ERROR_SHARE
from sqleval_pipeline.textfiles import write_atomically
from sqleval_pipeline.errors import InputError

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


class VendorRows(BaseModel):
    """Attempts whose vendor sent its own rows for its SQL, compared with sqleval's execution
    of that SQL on the pinned snapshot, and graded themselves."""

    n_sent: int = Field(description="attempts with the vendor's rows")
    n_compared: int = Field(description="of those, compared with sqleval's rows (both readable, full)")
    n_disagree: int
    disagreeing_cases: list[str] = Field(default_factory=list)
    n_partial_or_unreadable: int = 0
    vendor_accuracy: float | None = Field(None, description="CORRECT or CORRECT_FACTS share of the "
                                          "vendor's graded rows (answerable cases)")
    n_vendor_graded: int = 0

    def line(self) -> str:
        acc = ("" if self.vendor_accuracy is None else
               f"; graded on their own, {100 * self.vendor_accuracy:.1f}% of {self.n_vendor_graded} correct")
        cases = f" (cases {', '.join(self.disagreeing_cases[:10])}" + (
            " …)" if len(self.disagreeing_cases) > 10 else ")") if self.disagreeing_cases else ""
        return (f"{self.n_disagree} of {self.n_compared} attempts' vendor rows disagree with sqleval's "
                f"execution of the same SQL{cases}{acc}"
                + (f"; {self.n_partial_or_unreadable} partial or unreadable" if self.n_partial_or_unreadable else ""))


def vendor_rows_summary(grades) -> VendorRows | None:
    """The summary of the grades' vendor fields; None when no attempt had vendor rows."""
    sent = [g for g in grades if getattr(g, "vendor_rows", None) is not None
            or getattr(g, "vendor_outcome", None) is not None]
    if not sent:
        return None
    compared = [g for g in sent if g.vendor_rows in ("agree", "disagree")]
    disagree = [g for g in compared if g.vendor_rows == "disagree"]
    graded = [g for g in sent if g.vendor_outcome is not None]
    return VendorRows(
        n_sent=len(sent), n_compared=len(compared), n_disagree=len(disagree),
        disagreeing_cases=sorted({g.case_id for g in disagree}),
        n_partial_or_unreadable=sum(g.vendor_rows in ("partial", "unreadable") for g in sent),
        vendor_accuracy=(sum(g.vendor_outcome in ("CORRECT", "CORRECT_FACTS") for g in graded) / len(graded)
                         if graded else None), n_vendor_graded=len(graded))


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


class SuiteSummary(BaseModel):
    """Test-suite accuracy beside accuracy on the pinned snapshot (docs/test-suite.md).

    ``accuracy`` of the scorecard is the suite accuracy: an answer right on the snapshot and
    wrong on a neighbour of its case's suite counts as WRONG (``accidental_match``).
    ``snapshot_accuracy`` is what the snapshot alone would have said, with its interval."""

    suite: str = Field(description="the suite the answers were checked on (digest of suite.json)")
    snapshot_accuracy: Rate
    suite_accuracy: Rate
    n_checked: int = Field(description="attempts right on the snapshot checked on a suite")
    n_accidental: int = Field(description="of those, right on the snapshot only (accidental_match)")
    accidental_cases: list[str] = Field(default_factory=list)
    n_no_suite: int = Field(0, description="attempts right on the snapshot whose case has no suite")
    n_inconclusive: int = Field(0, description="attempts no neighbour could say anything about "
                                "(refused, timed out or cut by the row cap there)")


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
    #: latency, tokens and cost per question (docs/grading.md); None: built without the
    #: attempts (e.g. from a grades file alone, or written before they were measured)
    usage: UsageMetrics | None = None
    #: the vendor's own rows where it sent them (grading/vendor_rows.py); None: none sent
    vendor_rows: VendorRows | None = None
    #: test-suite accuracy beside snapshot accuracy; None: graded on the snapshot alone
    test_suite: SuiteSummary | None = None
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
        if not isinstance(data, dict) or data.get("schema_version") != SCORECARD_SCHEMA:
            data = data if isinstance(data, dict) else {}
            raise InputError(
                f"unsupported scorecard schema {data.get('schema_version')!r} (expected {SCORECARD_SCHEMA})"
            )
        return cls.model_validate(data)

    def save(self, path: str | os.PathLike[str]) -> Path:
        p = Path(path)
        write_atomically(p, self.to_json())  # a crash never leaves half a file
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Scorecard:
        """Read a scorecard file; an unreadable, damaged or foreign file is an
        :class:`~sqleval_pipeline.errors.InputError` naming it."""
        try:
            return cls.from_json(Path(path).read_text(encoding="utf-8"))
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from None
        except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: JSON and pydantic
            raise InputError(f"{path}: not a readable scorecard ({str(exc).splitlines()[0][:300]}); "
                             "rebuild it with `sqleval scorecard` or rerun the configuration") from None


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


# --------------------------------------------------------------------------- a case's counts


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
