"""Latency, tokens and cost per question (docs/grading.md#latency-tokens-and-cost).

**Per question** means per attempt: one golden question asked once (a case asked in three
runs is three questions). Every number is over the attempts that have the value recorded,
and says how many those are; nothing recorded gives None, never 0.

- **latency**: ``usage.wall_s`` — from the first call to the answer (or to giving up),
  retries and their waits included — over every attempt with a time, ERROR attempts
  included (a question the system could not answer in time still took that time). Median,
  p95 (linear interpolation between closest ranks, numpy's default) and mean, in seconds.
- **tokens**: input and output tokens as the provider reported them, median and mean.
- **cost** (with a price table): ``input_tokens × input_per_million_tokens / 1e6 +
  output_tokens × output_per_million_tokens / 1e6 + per_request``, for each attempt whose
  priced quantities are all recorded (a token count is needed only when its price is not 0);
  mean and total over those attempts.

>>> from sqleval_pipeline.configs import Pricing
>>> from sqleval_pipeline.pipeline.records import Usage
>>> rows = [AttemptUsage(config_version="c", case_id="q1", run_index=r, kind="sql",
...                      usage=Usage(wall_s=s, input_tokens=1000, output_tokens=100))
...         for r, s in enumerate([1.0, 2.0, 4.0])]
>>> m = usage_metrics(rows, Pricing(input_per_million_tokens=3.0, output_per_million_tokens=15.0))
>>> m.latency.n, m.latency.median_s, round(m.latency.p95_s, 2)
(3, 2.0, 3.8)
>>> round(m.cost.mean_per_question, 6), round(m.cost.total, 6)
(0.0045, 0.0135)
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field
import duckdb

from sqleval_pipeline.configs import Pricing
from sqleval_pipeline.pipeline.records import Attempt, AttemptKey, Usage
from sqleval_pipeline.pipeline.recordio import iter_records

#: the percentile the latency threshold of the gate reads
LATENCY_PERCENTILE = 95


class AttemptUsage(AttemptKey):
    """What the scorecard reads of an attempt: its key, kind, usage and retries (a light
    record: the attempts file's prompts, SQL and raw responses are not read)."""

    kind: Literal["sql", "refusal", "error"]
    usage: Usage | None = None
    retries: int = 0

    @classmethod
    def of(cls, a: Attempt | AttemptUsage) -> AttemptUsage:
        if isinstance(a, AttemptUsage):
            return a
        return cls(config_version=a.config_version, case_id=a.case_id, run_index=a.run_index,
                   kind=a.kind, usage=a.usage, retries=a.retries)


def read_attempt_usage(path: str | os.PathLike[str]) -> list[AttemptUsage]:
    """The usage of every attempt of an attempts file (``.parquet``: only the columns needed
    are read; JSON Lines: whole attempts). Files written before ``usage.wall_s`` existed load
    with no time."""
    path = Path(path)
    if path.suffix == ".parquet":
        return list(iter_records(path, AttemptUsage, columns=_present(path, AttemptUsage.model_fields)))
    return [AttemptUsage.of(a) for a in iter_records(path, Attempt)]


def _present(path: Path, wanted: Iterable[str]) -> list[str]:
    """The ``wanted`` columns a Parquet file has (an early file may lack ``usage``)."""
    con = duckdb.connect()
    try:
        have = {r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()}
    except duckdb.Error:
        return list(wanted)  # unreadable: iter_records says so, naming the file
    finally:
        con.close()
    return [c for c in wanted if c in have]


class LatencyStats(BaseModel):
    """Seconds per question (``usage.wall_s``) over the attempts with a recorded time."""

    n: int = Field(description="attempts with a recorded time")
    n_errors: int = Field(0, description="ERROR attempts among them")
    median_s: float | None = None
    p95_s: float | None = None
    mean_s: float | None = None
    max_s: float | None = None


class TokenStats(BaseModel):
    """Tokens per question over the attempts whose provider reported them."""

    n: int = Field(description="attempts with the count recorded")
    median: float | None = None
    mean: float | None = None


class CostStats(BaseModel):
    """Cost per question under the configuration's price table (``currency``)."""

    currency: str
    n: int = Field(description="attempts whose cost could be computed (every priced quantity recorded)")
    mean_per_question: float | None = None
    total: float | None = Field(None, description="sum over those attempts")


class UsageMetrics(BaseModel):
    """The scorecard's latency, tokens and cost (all per question = per attempt)."""

    n_attempts: int = Field(description="attempts considered (every attempt of the scorecard)")
    retries: int = Field(0, description="retries made, in all")
    latency: LatencyStats
    input_tokens: TokenStats
    output_tokens: TokenStats
    #: the price table the cost was computed with (None: no price table, no cost)
    pricing: Pricing | None = None
    cost: CostStats | None = None


def cost_of(usage: Usage | None, pricing: Pricing) -> float | None:
    """One question's cost, or None when a quantity with a non-zero price is not recorded.

    >>> p = Pricing(input_per_million_tokens=3.0, output_per_million_tokens=15.0, per_request=0.01)
    >>> round(cost_of(Usage(input_tokens=2000, output_tokens=200), p), 6)
    0.019
    >>> cost_of(Usage(input_tokens=2000), p) is None
    True
    >>> cost_of(None, Pricing(per_request=0.02))
    0.02
    """
    u = usage or Usage()
    cost = pricing.per_request
    for tokens, price in ((u.input_tokens, pricing.input_per_million_tokens),
                          (u.output_tokens, pricing.output_per_million_tokens)):
        if price:
            if tokens is None:
                return None
            cost += tokens * price / 1_000_000
    return cost


def _stats(values: list[float]) -> tuple[float | None, float | None, float | None]:
    """(median, p95, mean); None over nothing."""
    if not values:
        return None, None, None
    a = np.asarray(values, dtype=float)
    return float(np.median(a)), float(np.percentile(a, LATENCY_PERCENTILE)), float(a.mean())


def usage_metrics(attempts: Iterable[Attempt | AttemptUsage], pricing: Pricing | None = None, *,
                  keys: Collection[tuple[str, str, int]] | None = None) -> UsageMetrics:
    """Latency, tokens and cost per question of ``attempts`` (only those whose key is in
    ``keys``, when given: the scorecard's own attempts)."""
    rows = [AttemptUsage.of(a) for a in attempts]
    if keys is not None:
        wanted = set(keys)
        rows = [r for r in rows if r.key in wanted]
    timed = [(r.usage.wall_s, r.kind) for r in rows if r.usage is not None and r.usage.wall_s is not None]
    median, p95, mean = _stats([t for t, _k in timed])
    latency = LatencyStats(n=len(timed), n_errors=sum(1 for _t, k in timed if k == "error"),
                           median_s=median, p95_s=p95, mean_s=mean,
                           max_s=max((t for t, _k in timed), default=None))

    def tokens(field: str) -> TokenStats:
        values = [getattr(r.usage, field) for r in rows
                  if r.usage is not None and getattr(r.usage, field) is not None]
        med, _p, avg = _stats(values)
        return TokenStats(n=len(values), median=med, mean=avg)

    cost = None
    if pricing is not None:
        costs = [c for c in (cost_of(r.usage, pricing) for r in rows) if c is not None]
        cost = CostStats(currency=pricing.currency, n=len(costs),
                         mean_per_question=float(np.mean(costs)) if costs else None,
                         total=float(np.sum(costs)) if costs else None)
    return UsageMetrics(n_attempts=len(rows), retries=sum(r.retries for r in rows),
                        latency=latency, input_tokens=tokens("input_tokens"),
                        output_tokens=tokens("output_tokens"), pricing=pricing, cost=cost)


# --------------------------------------------------------------------------- rendering


def _seconds(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.3f} s" if v < 10 else f"{v:.1f} s"


def _money(v: float | None, currency: str) -> str:
    if v is None:
        return "n/a"
    return f"{v:.6f} {currency}" if abs(v) < 1 else f"{v:,.2f} {currency}"


def _count(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.1f}".rstrip("0").rstrip(".")


def usage_lines(m: UsageMetrics | None) -> list[tuple[str, str]]:
    """``(metric, value)`` rows of the scorecard renderings.

    >>> usage_lines(None)[0][1][:33]
    'not measured: this scorecard was '
    """
    if m is None:
        return [("latency, tokens, cost per question",
                 "not measured: this scorecard was built without the attempts file")]
    n = m.n_attempts
    lat = m.latency
    if lat.n:
        errors = f", {lat.n_errors} of them ERROR" if lat.n_errors else ""
        latency = (f"median {_seconds(lat.median_s)}, p95 {_seconds(lat.p95_s)}, mean "
                   f"{_seconds(lat.mean_s)}, max {_seconds(lat.max_s)} (over {lat.n} of {n} "
                   f"attempts with a recorded time{errors}; retries and their waits included, "
                   f"{m.retries} retries in all)")
    else:
        latency = f"not recorded (0 of {n} attempts have a time)"
    parts = []
    for label, t in (("input", m.input_tokens), ("output", m.output_tokens)):
        parts.append(f"{label} median {_count(t.median)}, mean {_count(t.mean)} ({t.n} of {n})"
                     if t.n else f"{label} not recorded (0 of {n})")
    lines = [("latency per question", latency), ("tokens per question", "; ".join(parts))]
    if m.cost is None:
        lines.append(("cost per question", "no price table (pricing: in the configuration)"))
    elif m.cost.n:
        c = m.cost
        lines.append(("cost per question", f"mean {_money(c.mean_per_question, c.currency)}, total "
                      f"{_money(c.total, c.currency)} (over {c.n} of {n} attempts with the priced "
                      "quantities recorded)"))
    else:
        lines.append(("cost per question", f"not recorded: no attempt of {n} has the token counts "
                      "its price table needs"))
    return lines
