"""Regression gate (docs/configurations.md).

The gate fails when, on the paired cases of the pinned set, the candidate's accuracy is below
the baseline's — or, with ``fail_on_case_regression``, when any case that passed in the
baseline now fails — unless ``evals/decisions.yaml`` holds a matching decision (who, why,
date, baseline and candidate versions).

>>> from sqleval_pipeline.pipeline.records import Grade
>>> from sqleval_pipeline.scoring.scorecard import build_scorecard
>>> def sc(cfg, outcomes):
...     return build_scorecard([Grade(config_version=cfg, case_id=f"q{i}", run_index=0, outcome=o,
...         reason="x", grader_version="r1", band="answerable", difficulty="top_k", split="dev",
...         cluster="c") for i, o in enumerate(outcomes)], resamples=100)
>>> r = gate(sc("base", ["CORRECT", "CORRECT"]), sc("cand", ["CORRECT", "WRONG"]), [])
>>> r.passed, r.failures[0][:35]
(False, 'accuracy dropped from 100.0% to 50.')
>>> ok = Decision(who="ana", why="accepted for latency", date="2025-06-01",
...               baseline="base", candidate="cand")
>>> gate(sc("base", ["CORRECT", "CORRECT"]), sc("cand", ["CORRECT", "WRONG"]), [ok]).passed
True

An outage is not a result: a candidate with more than 10% ERROR attempts is inconclusive,
whatever its accuracy and whatever the decisions.

>>> r = gate(sc("base", ["CORRECT", "WRONG"]), sc("cand", ["CORRECT", "ERROR"]), [ok])
>>> r.passed, r.inconclusive, r.message[:60]
(False, True, 'gate INCONCLUSIVE: candidate cand: 1 of 2 attempts are ERROR')

Limits (the configuration's ``gate:`` block) are checked on the candidate's own scorecard: a
p95 latency and a mean cost per question. A limit whose measurement was not recorded fails
closed, and no decision waives a limit.

>>> from sqleval_pipeline.configs import GateSettings
>>> r = gate(sc("base", ["CORRECT"]), sc("cand", ["CORRECT"]), [],
...          thresholds=GateSettings(max_p95_latency_s=5))
>>> r.passed, r.thresholds[0].status
(False, 'not_recorded')
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

import yaml
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sqleval_pipeline.configs import GateSettings
from sqleval_pipeline.scoring import stats
from sqleval_pipeline.scoring.diff import Diff, diff
from sqleval_pipeline.scoring.scorecard import Scorecard
from sqleval_pipeline.pipeline.store import INCONCLUSIVE_ERROR_SHARE
from sqleval_pipeline.errors import InputError

GATE_SCHEMA = "sqleval.gate/1"
DEFAULT_DECISIONS = Path("evals/decisions.yaml")
_EPS = 1e-12


class Decision(BaseModel):
    """An explicit, recorded acceptance of a regression between two configuration versions."""

    model_config = ConfigDict(extra="forbid")

    who: str = Field(min_length=1)
    why: str = Field(min_length=1)
    date: _dt.date
    baseline: str = Field(min_length=1, description="baseline configuration version (or a >= 7-char prefix)")
    candidate: str = Field(min_length=1, description="candidate configuration version (or a >= 7-char prefix)")
    batch: str | None = Field(None, description="the candidate batch it accepts; required to accept "
                              "drift between two batches of one version (a nightly run)")

    @field_validator("baseline", "candidate", mode="before")
    @classmethod
    def _versions_as_text(cls, v: object) -> object:
        # YAML reads an all-digit hash as a number: versions are always text
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    def matches(self, baseline: str, candidate: str, batch: str | None = None,
                require_batch: bool = False) -> bool:
        if self.batch is not None and self.batch != batch:
            return False
        if require_batch and self.batch is None:
            return False  # "version X may be worse than itself" would waive every night
        return _version_match(self.baseline, baseline) and _version_match(self.candidate, candidate)


def _version_match(pattern: str, version: str) -> bool:
    return pattern == version or (len(pattern) >= 7 and version.startswith(pattern))


def load_decisions(path: str | os.PathLike[str] = DEFAULT_DECISIONS) -> list[Decision]:
    """Read ``decisions.yaml`` (a YAML list; a missing file or an empty document is no decision)."""
    p = Path(path)
    if not p.exists():
        return []
    data = yaml.safe_load(p.read_text(encoding="utf-8"))
    if data is None:
        return []
    if not isinstance(data, list):
        raise InputError(f"{p}: expected a YAML list of decisions, got {type(data).__name__}")
    out = []
    for i, entry in enumerate(data):
        try:
            out.append(Decision.model_validate(entry))
        except ValidationError as e:
            raise InputError(f"{p}: decision #{i + 1} is invalid (needs who, why, date, baseline, candidate): {e}") from e
    return out


class ThresholdCheck(BaseModel):
    """One limit of the configuration's ``gate:`` block, checked on the candidate's scorecard."""

    name: Literal["max_p95_latency_s", "max_cost_per_question"]
    limit: float
    value: float | None = Field(description="the measurement (None: not recorded)")
    status: Literal["passed", "failed", "not_recorded"]
    n: int = Field(0, description="attempts the measurement is over")
    n_attempts: int = Field(0, description="attempts of the scorecard")
    message: str

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def check_thresholds(candidate: Scorecard, settings: GateSettings | None) -> list[ThresholdCheck]:
    """The limits set in ``settings`` checked on ``candidate``'s latency and cost per question
    (docs/configurations.md). A limit whose measurement is missing is ``not_recorded``, which
    fails: nothing measured is never taken for "within the limit"."""
    if settings is None or not settings.any:
        return []
    u = candidate.usage
    n_all = u.n_attempts if u is not None else candidate.n_attempts
    out: list[ThresholdCheck] = []
    if settings.max_p95_latency_s is not None:
        limit = settings.max_p95_latency_s
        value = u.latency.p95_s if u is not None else None
        n = u.latency.n if u is not None else 0
        out.append(_limit_check(
            "max_p95_latency_s", limit, value, n, n_all, unrecorded=f"{_fmt(limit)} s but no latency",
            why="the scorecard was built without its attempts" if u is None else f"0 of {n_all} attempts have a time",
            shown=f"p95 latency {value:.3f} s" if value is not None else "", limit_text=f"{_fmt(limit)} s",
            over=f"over {n} of {n_all} attempts with a recorded time"))
    if settings.max_cost_per_question is not None:
        limit = settings.max_cost_per_question
        cost = u.cost if u is not None else None
        value = cost.mean_per_question if cost is not None else None
        out.append(_limit_check(
            "max_cost_per_question", limit, value, cost.n if cost is not None else 0, n_all,
            unrecorded=f"{_fmt(limit)} but no cost",
            why=("the scorecard was built without its attempts" if u is None else
                 "the scorecard has no price table (pricing: in the configuration)" if cost is None
                 else f"0 of {n_all} attempts have the token counts the price table needs"),
            shown=f"mean cost per question {value:.6g} {cost.currency}" if value is not None else "",
            limit_text=f"{_fmt(limit)} {cost.currency}" if cost is not None else "",
            over=f"over {cost.n if cost is not None else 0} of {n_all} attempts"))
    return out


def _limit_check(field: str, limit: float, value: float | None, n: int, n_all: int, *, unrecorded: str,
                 why: str, shown: str, limit_text: str, over: str) -> ThresholdCheck:
    """One limit of ``gate:`` checked on a measured value: passed, failed, or ``not_recorded``
    (which fails: a limit nobody can check is not met)."""
    name = f"gate.{field}"
    if value is None:
        return ThresholdCheck(name=field, limit=limit, value=None, status="not_recorded", n=0, n_attempts=n_all,
                              message=f"{name} is {unrecorded} was recorded ({why}): the limit cannot be "
                                      "checked, so it fails")
    ok = value <= limit
    return ThresholdCheck(name=field, limit=limit, value=value, status="passed" if ok else "failed", n=n,
                          n_attempts=n_all, message=f"{shown} is {'within' if ok else 'above'} {name} = "
                                                    f"{limit_text} ({over})")


class GateResult(BaseModel):
    schema_version: str = GATE_SCHEMA
    passed: bool
    waived: bool = Field(description="a regression was found but a recorded decision accepts it")
    baseline_config: str
    candidate_config: str
    baseline_accuracy: float | None
    candidate_accuracy: float | None
    delta: float | None
    fail_on_case_regression: bool
    failures: list[str]
    regressed_cases: list[str]
    decision: Decision | None = None
    rebased: bool = False
    #: the candidate (or the baseline) is an outage, not a measurement: more than
    #: INCONCLUSIVE_ERROR_SHARE of its attempts are ERROR; no decision can pass it
    inconclusive: bool = False
    #: the limits of the candidate configuration's ``gate:`` block (latency, cost), checked on
    #: its scorecard; a limit not met fails the gate whatever the decisions
    thresholds: list[ThresholdCheck] = Field(default_factory=list)

    @property
    def thresholds_failed(self) -> list[ThresholdCheck]:
        return [t for t in self.thresholds if not t.passed]

    @property
    def message(self) -> str:
        limits = [t.message for t in self.thresholds_failed]
        if self.inconclusive:
            return ("gate INCONCLUSIVE: " + "; ".join(self.failures) + ". ERROR attempts are not answers: "
                    "run the same configuration again (its ERROR attempts are retried) once the "
                    "provider or harness works")
        limit_hint = (" A decision does not waive a limit: make the system faster or cheaper, or "
                      "change the limit in the configuration's gate: block (not part of its "
                      "version).") if limits else ""
        if not self.failures and not limits:
            met = "; ".join(t.message for t in self.thresholds)
            return "gate passed: no regression" + (f"; {met}" if met else "")
        if self.waived and self.decision is not None:
            d = self.decision
            text = (f"gate passed by decision of {d.who} on {d.date}: {d.why} (regression: "
                    f"{'; '.join(self.failures)})")
            return text if not limits else (
                "gate FAILED: " + "; ".join(limits) + "." + limit_hint + " (The regression "
                f"itself is accepted by decision of {d.who} on {d.date}: {d.why}.)")
        if not self.failures:
            return "gate FAILED: " + "; ".join(limits) + "." + limit_hint
        return "gate FAILED: " + "; ".join(self.failures + limits) + (
            ". Record an explicit decision in evals/decisions.yaml (who, why, date, baseline, candidate) "
            "to accept the regression." + limit_hint
        )

    def to_json(self) -> str:
        data = self.model_dump(mode="json")
        data["message"] = self.message
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _interval_text(ci) -> str:
    """``; 95% paired interval [-9.1, -1.2] points (cluster bootstrap (24 clusters))``."""
    if ci is None or ci.low is None or ci.high is None:
        return ""
    return f"; 95% paired interval [{100 * ci.low:+.1f}, {100 * ci.high:+.1f}] points ({ci.method})"


def gate(
    baseline: Scorecard,
    candidate: Scorecard,
    decisions: list[Decision],
    *,
    fail_on_case_regression: bool = False,
    rebase: bool = False,
    comparison: Diff | None = None,
    seed: int = stats.DEFAULT_SEED,
    resamples: int = 200,
    candidate_batch: str | None = None,
    drift: bool = False,
    thresholds: GateSettings | None = None,
) -> GateResult:
    """Apply the regression gate (raises IncomparableScorecards like :func:`diff`).

    ``drift``: the two are batches of one configuration version (a nightly re-run): only a
    drop whose paired 95% interval lies below zero fails (two runs of one system differ by
    sampling; the failure names the interval and its method), and only a decision naming
    ``candidate_batch`` accepts it.

    ``thresholds``: the candidate configuration's ``gate:`` block; its limits are checked on
    ``candidate`` (:func:`check_thresholds`) and recorded in ``GateResult.thresholds``. A
    limit not met, or not measured, fails the gate; no decision waives it."""
    outages = [f"{who} {sc.config_version}: {sc.errors.count} of {sc.attempts_total} attempts are ERROR "
               f"({100 * (sc.error_share or 0):.0f}% > {100 * INCONCLUSIVE_ERROR_SHARE:.0f}%)"
               for who, sc in (("candidate", candidate), ("baseline", baseline)) if sc.inconclusive]
    d = comparison or diff(baseline, candidate, rebase=rebase, seed=seed, resamples=resamples)
    acc = d.metric("accuracy")
    limits = check_thresholds(candidate, thresholds)
    if outages:
        return GateResult(passed=False, waived=False, baseline_config=baseline.config_version,
                          candidate_config=candidate.config_version, baseline_accuracy=acc.baseline,
                          candidate_accuracy=acc.candidate, delta=acc.delta,
                          fail_on_case_regression=fail_on_case_regression, failures=outages,
                          regressed_cases=d.newly_failing, rebased=d.rebased, inconclusive=True,
                          thresholds=limits)
    failures = []
    significant = not drift or (acc.ci is not None and acc.ci.high is not None
                                 and acc.ci.high < -_EPS)
    if acc.delta is not None and acc.delta < -_EPS and significant:
        failures.append(
            f"accuracy dropped from {100 * acc.baseline:.1f}% to {100 * acc.candidate:.1f}% "  # type: ignore[operator]
            f"({100 * acc.delta:+.1f} points) on {d.n_paired_cases} paired cases"
            + (_interval_text(acc.ci) if drift else "")
        )
    elif acc.baseline is not None and acc.candidate is None:
        failures.append("candidate has no graded answerable attempt (accuracy over nothing)")
    if fail_on_case_regression and d.newly_failing:
        failures.append(f"{len(d.newly_failing)} previously passing case(s) now fail: {', '.join(d.newly_failing[:10])}")
    decision = None
    if failures:
        decision = next((x for x in decisions if x.matches(
            baseline.config_version, candidate.config_version, candidate_batch, drift)), None)
    return GateResult(
        passed=(not failures or decision is not None) and all(t.passed for t in limits),
        waived=bool(failures) and decision is not None,
        baseline_config=baseline.config_version,
        candidate_config=candidate.config_version,
        baseline_accuracy=acc.baseline,
        candidate_accuracy=acc.candidate,
        delta=acc.delta,
        fail_on_case_regression=fail_on_case_regression,
        failures=failures,
        regressed_cases=d.newly_failing,
        decision=decision,
        rebased=d.rebased,
        thresholds=limits,
    )
