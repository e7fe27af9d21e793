"""Statistics for scorecards: intervals that never overclaim, paired deltas, McNemar, sample size.

All resampling is seeded (``numpy.random.default_rng(seed)``) so the same grades always give
the same intervals.

**The interval rule** (docs/grading.md#intervals), per slice and metric, applied by
:func:`ratio_interval` and :func:`paired_delta_interval` to per-case numerators and
denominators (a case's runs are summed: they stay together in every resample):

- at least :data:`MIN_CLUSTERS` clusters contribute: percentile **cluster bootstrap**;
- 2 to MIN_CLUSTERS − 1 clusters: the **wider** of the percentile case bootstrap and the
  cluster bootstrap (low = the lower of the two lows, high = the higher of the two highs);
- one cluster: percentile **case bootstrap**;
- the result has zero width (the bootstrap is degenerate: every resampled unit alike, e.g.
  25/25 correct, or a single case): a rate gets the **Wilson** score interval with n = the
  number of cases; a paired difference gets the **exact bound** on the share of cases that
  could differ from the observed one (:func:`exact_shift_bound`).

So no interval of a rate over at least one case has zero width.

>>> low, high = cluster_bootstrap_ratio([3, 1], [3, 3], resamples=500, seed=1)
>>> 0 <= low <= 4 / 6 <= high <= 1
True
>>> e = ratio_interval([1] * 25, [1] * 25, ["general"] * 25, resamples=200)
>>> e.kind, round(e.low, 3), e.high, e.method
('wilson', 0.867, 1.0, 'Wilson score, n = 25 cases (degenerate bootstrap; 1 cluster)')
>>> cases_needed(0.03, 0.112)  # Miller's worked example: ~969 paired questions
969
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from statistics import NormalDist
from typing import NamedTuple

import numpy as np
from sqleval_pipeline.errors import InputError

DEFAULT_SEED = 20240917
DEFAULT_RESAMPLES = 2000
LEVEL = 0.95
#: fewest contributing clusters for a plain cluster bootstrap. Below it the percentile cluster
#: bootstrap undercovers badly (simulated 95% intervals: 52-56% coverage with 2 clusters,
#: 77-78% with 3, 83-84% with 5, 89-91% with 10, 93% with 20 and 30; docs/grading.md), so
#: the wider of the case and the cluster bootstrap is used instead.
MIN_CLUSTERS = 20
#: a zero-width bootstrap interval (all resamples alike) is degenerate below this width
_ZERO = 1e-12

POWER_FORMULA = (
    "n = ceil((z_{1-alpha/2} + z_{power})^2 * (p_d - delta^2) / delta^2), where p_d is the "
    "share of cases on which the two configurations disagree (discordance) and delta the "
    "difference in accuracy; the variance of a per-case paired difference in {-1, 0, 1} is "
    "p_d - delta^2. Clustered: n * design effect (cluster-bootstrap variance / case-bootstrap "
    "variance, floored at 1; with fewer than 20 clusters the larger of that and Kish's "
    "1 + (m - 1) * ICC; with one cluster it is not estimated and stays 1). Without a pairing, "
    "p_d defaults to 2p(1-p) at the observed accuracy p (two configurations failing "
    "independently: conservative)."
)


#: resampled indices drawn at a time (rows x units): memory stays at a few MB whatever the
#: number of cases (a 2,000 x 10,000 index matrix alone is 160 MB)
CHUNK_CELLS = 1 << 20


def _ratio_draws(num: np.ndarray, den: np.ndarray, idx: np.ndarray) -> np.ndarray:
    n = num[idx].sum(axis=1)
    d = den[idx].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(d > 0, n / np.where(d > 0, d, 1), np.nan)


def _index_chunks(rng: np.random.Generator, units: int, resamples: int):
    """The ``resamples x units`` bootstrap index matrix, a block of rows at a time. The blocks
    are the rows ``rng.integers(0, units, size=(resamples, units))`` would give in one call
    (the generator's stream is consumed in the same order), so chunking changes no interval."""
    rows = max(1, CHUNK_CELLS // max(1, units))
    done = 0
    while done < resamples:
        k = min(rows, resamples - done)
        yield rng.integers(0, units, size=(k, units))
        done += k


def _draws(rng, num: np.ndarray, den: np.ndarray, resamples: int) -> np.ndarray:
    return np.concatenate([_ratio_draws(num, den, idx)
                           for idx in _index_chunks(rng, len(num), resamples)])


def _interval(draws: np.ndarray, level: float) -> tuple[float | None, float | None]:
    draws = draws[~np.isnan(draws)]
    if not len(draws):
        return None, None
    a = (1 - level) / 2
    lo, hi = np.quantile(draws, [a, 1 - a])
    return float(lo), float(hi)


def cluster_bootstrap_ratio(
    num: Sequence[float],
    den: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = LEVEL,
) -> tuple[float | None, float | None]:
    """Percentile interval of sum(num)/sum(den) resampling *clusters* (one entry per cluster).

    Resamples where the sampled denominator is zero are dropped. Returns (None, None) when
    there is nothing to estimate.
    """
    num_a, den_a = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if not len(num_a) or den_a.sum() <= 0:
        return None, None
    return _interval(_draws(np.random.default_rng(seed), num_a, den_a, resamples), level)


def bootstrap_variance(num: Sequence[float], den: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES,
                       seed: int = DEFAULT_SEED) -> float | None:
    """Bootstrap variance of sum(num)/sum(den) resampling the given units."""
    num_a, den_a = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if len(num_a) < 2 or den_a.sum() <= 0:
        return None
    draws = _draws(np.random.default_rng(seed), num_a, den_a, resamples)
    draws = draws[~np.isnan(draws)]
    return float(np.var(draws)) if len(draws) > 1 else None


def paired_bootstrap_delta(
    num_base: Sequence[float],
    den_base: Sequence[float],
    num_cand: Sequence[float],
    den_cand: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = LEVEL,
) -> tuple[float | None, float | None]:
    """Interval of (candidate ratio - baseline ratio), resampling the same clusters for both."""
    nb, db, nc, dc = (np.asarray(x, dtype=float) for x in (num_base, den_base, num_cand, den_cand))
    if not len(nb) or db.sum() <= 0 or dc.sum() <= 0:
        return None, None
    rng = np.random.default_rng(seed)
    deltas = np.concatenate([_ratio_draws(nc, dc, idx) - _ratio_draws(nb, db, idx)
                             for idx in _index_chunks(rng, len(nb), resamples)])
    return _interval(deltas, level)


# --------------------------------------------------------------------------- honest intervals


class Estimate(NamedTuple):
    """An interval with the method that produced it.

    ``kind`` is one of ``cluster`` (cluster bootstrap), ``case`` (case bootstrap), ``wider``
    (the wider of the two), ``wilson`` (Wilson score, degenerate bootstrap), ``exact`` (exact
    bound on a paired difference, degenerate paired bootstrap) or ``none`` (nothing to
    estimate: low and high are None). ``n_clusters`` and ``n_cases`` count the clusters and
    cases that contribute (a non-zero denominator)."""

    low: float | None
    high: float | None
    kind: str
    method: str
    n_clusters: int
    n_cases: int


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _cluster_arrays(clusters: Sequence[Hashable], *columns: np.ndarray) -> list[np.ndarray]:
    """Per-cluster sums of each per-case column, clusters sorted by name (the order the
    scorecard has always resampled them in: same seed, same clusters, same interval)."""
    names = sorted(set(clusters))
    pos = {n: i for i, n in enumerate(names)}
    idx = np.fromiter((pos[c] for c in clusters), dtype=np.int64, count=len(clusters))
    return [np.bincount(idx, weights=col, minlength=len(names)) for col in columns]


def _tier(n_clusters: int, min_clusters: int, n_cases: int) -> tuple[str, str]:
    cases = _plural(n_cases, "case")
    if n_clusters >= min_clusters:
        return "cluster", f"cluster bootstrap ({_plural(n_clusters, 'cluster')})"
    if n_clusters >= 2:
        return "wider", (f"wider of case and cluster bootstrap ({cases}; "
                         f"{n_clusters} clusters < {min_clusters})")
    return "case", f"case bootstrap ({cases}; 1 cluster < {min_clusters})"


def wilson_interval(p: float, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval of a proportion ``p`` observed on ``n`` independent units.

    >>> lo, hi = wilson_interval(1.0, 25)
    >>> round(lo, 4), hi
    (0.8668, 1.0)
    """
    if n <= 0:
        raise InputError("a Wilson interval needs n >= 1")
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(max(0.0, p * (1 - p) / n + z2 / (4 * n * n)))
    return max(0.0, centre - half), min(1.0, centre + half)


def exact_shift_bound(delta: float, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Interval of a paired difference when all ``n`` paired cases showed the same difference
    ``delta`` (e.g. 0: no discordant case). None of n cases differed, so the share q of cases
    that could differ is at most the exact (Clopper-Pearson) bound ``1 - (alpha/2)^(1/n)``;
    such cases move the mean by at most ``q * (1 + delta)`` down and ``q * (1 - delta)`` up
    (a per-case difference lies in [-1, 1]).

    >>> lo, hi = exact_shift_bound(0.0, 25)
    >>> round(lo, 4), round(hi, 4)
    (-0.1372, 0.1372)
    """
    if n <= 0:
        raise InputError("an exact bound needs n >= 1")
    q = 1 - ((1 - level) / 2) ** (1 / n)
    return max(-1.0, delta - q * (1 + delta)), min(1.0, delta + q * (1 - delta))


def ratio_interval(
    num: Sequence[float],
    den: Sequence[float],
    clusters: Sequence[Hashable],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = LEVEL,
    min_clusters: int = MIN_CLUSTERS,
) -> Estimate:
    """Interval of sum(num)/sum(den) from per-case sums (``clusters[i]``: case i's cluster),
    by the rule in this module's docstring. The case bootstrap resamples the cases with a
    non-zero denominator (in the order given); the cluster bootstrap every cluster, sorted by
    name.

    >>> e = ratio_interval([1, 0, 1, 1], [1, 1, 1, 1], ["a", "a", "a", "a"], resamples=300)
    >>> e.kind, e.method
    ('case', 'case bootstrap (4 cases; 1 cluster < 20)')
    """
    num_a, den_a = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if len(num_a) != len(clusters) or len(den_a) != len(clusters):
        raise InputError("num, den and clusters need one entry per case")
    live = den_a > 0
    n_cases = int(live.sum())
    n_clusters = len({c for c, ok in zip(clusters, live, strict=True) if ok})
    if n_cases == 0:
        return Estimate(None, None, "none", "none: a rate over nothing", 0, 0)
    kind, method = _tier(n_clusters, min_clusters, n_cases)
    kw = {"resamples": resamples, "seed": seed, "level": level}
    lo = hi = None
    if kind in ("cluster", "wider"):
        cn, cd = _cluster_arrays(clusters, num_a, den_a)
        lo, hi = cluster_bootstrap_ratio(cn, cd, **kw)
    if kind in ("case", "wider"):
        clo, chi = cluster_bootstrap_ratio(num_a[live], den_a[live], **kw)
        lo = clo if lo is None or clo is None else min(lo, clo)
        hi = chi if hi is None or chi is None else max(hi, chi)
    if lo is None or hi is None or hi - lo <= _ZERO:
        lo, hi = wilson_interval(float(num_a.sum() / den_a.sum()), n_cases, level)
        kind = "wilson"
        method = (f"Wilson score, n = {_plural(n_cases, 'case')} (degenerate bootstrap; "
                  f"{_plural(n_clusters, 'cluster')})")
    return Estimate(lo, hi, kind, method, n_clusters, n_cases)


def paired_delta_interval(
    num_base: Sequence[float],
    den_base: Sequence[float],
    num_cand: Sequence[float],
    den_cand: Sequence[float],
    clusters: Sequence[Hashable],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = LEVEL,
    min_clusters: int = MIN_CLUSTERS,
) -> Estimate:
    """Interval of (candidate ratio − baseline ratio) from per-case sums of the paired cases,
    by the same rule as :func:`ratio_interval`: the pairing unit is the cluster with enough
    clusters, else (also) the case; every resample draws the same units for both sides. A
    zero-width result gets :func:`exact_shift_bound` (n = paired cases)."""
    nb, db, nc, dc = (np.asarray(x, dtype=float) for x in (num_base, den_base, num_cand, den_cand))
    if not (len(nb) == len(db) == len(nc) == len(dc) == len(clusters)):
        raise InputError("the four columns and clusters need one entry per paired case")
    if db.sum() <= 0 or dc.sum() <= 0:
        return Estimate(None, None, "none", "none: a rate over nothing on one side", 0, 0)
    live = (db + dc) > 0
    n_cases = int(live.sum())
    n_clusters = len({c for c, ok in zip(clusters, live, strict=True) if ok})
    kind, method = _tier(n_clusters, min_clusters, n_cases)
    kw = {"resamples": resamples, "seed": seed, "level": level}
    lo = hi = None
    if kind in ("cluster", "wider"):
        lo, hi = paired_bootstrap_delta(*_cluster_arrays(clusters, nb, db, nc, dc), **kw)
    if kind in ("case", "wider"):
        clo, chi = paired_bootstrap_delta(nb[live], db[live], nc[live], dc[live], **kw)
        lo = clo if lo is None or clo is None else min(lo, clo)
        hi = chi if hi is None or chi is None else max(hi, chi)
    if lo is None or hi is None or hi - lo <= _ZERO:
        delta = float(nc.sum() / dc.sum() - nb.sum() / db.sum())
        lo, hi = exact_shift_bound(delta, n_cases, level)
        kind = "exact"
        method = (f"exact bound on discordance, n = {_plural(n_cases, 'paired case')} "
                  f"(degenerate paired bootstrap; {_plural(n_clusters, 'cluster')})")
    return Estimate(lo, hi, kind, method, n_clusters, n_cases)


def _kish_design_effect(y: np.ndarray, clusters: Sequence[Hashable]) -> float | None:
    """Kish's 1 + (m − 1)·ICC, ICC from the one-way ANOVA estimator on the per-case values
    ``y`` (m: the size-weighted mean cluster size, sum(m_g²)/N). None: not estimable."""
    groups: dict[Hashable, list[float]] = defaultdict(list)
    for v, c in zip(y, clusters, strict=True):
        groups[c].append(float(v))
    n, g = len(y), len(groups)
    if g < 2:
        return None
    sizes = np.array([len(v) for v in groups.values()], dtype=float)
    if n <= g:  # every cluster holds one case: nothing is clustered
        return 1.0
    grand = float(np.mean(y))
    means = np.array([np.mean(v) for v in groups.values()])
    ssb = float(np.sum(sizes * (means - grand) ** 2))
    ssw = float(sum(np.sum((np.asarray(v) - m) ** 2) for v, m in zip(groups.values(), means, strict=True)))
    msb, msw = ssb / (g - 1), ssw / (n - g)
    m0 = (n - float(np.sum(sizes ** 2)) / n) / (g - 1)
    denom = msb + (m0 - 1) * msw
    if denom <= 0:
        return None
    icc = max(0.0, (msb - msw) / denom)
    return 1.0 + (float(np.sum(sizes ** 2)) / n - 1.0) * icc


def design_effect(
    num: Sequence[float],
    den: Sequence[float],
    clusters: Sequence[Hashable],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    min_clusters: int = MIN_CLUSTERS,
) -> tuple[float, str, int]:
    """(design effect, how it was obtained, contributing clusters) of sum(num)/sum(den) from
    per-case sums (floored at 1):

    - at least ``min_clusters`` clusters: cluster-bootstrap variance / case-bootstrap variance;
    - 2 to min_clusters − 1: the larger of that ratio and Kish's 1 + (m − 1)·ICC (a bootstrap
      over a few clusters underestimates their variance);
    - one cluster: not estimated (1): a single cluster says nothing about clustering.

    >>> design_effect([1, 0, 1], [1, 1, 1], ["general"] * 3)[1]
    'not estimated (1 cluster < 20): cases counted as independent'
    """
    num_a, den_a = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    live = den_a > 0
    cl = [c for c, ok in zip(clusters, live, strict=True) if ok]
    n_clusters = len(set(cl))
    if n_clusters < 2 or live.sum() < 2:
        return 1.0, (f"not estimated ({_plural(n_clusters, 'cluster')} < {min_clusters}): "
                     "cases counted as independent"), n_clusters
    num_a, den_a = num_a[live], den_a[live]
    cn, cd = _cluster_arrays(cl, num_a, den_a)
    v_cl = bootstrap_variance(cn, cd, resamples=resamples, seed=seed)
    v_case = bootstrap_variance(num_a, den_a, resamples=resamples, seed=seed)
    ratio = (v_cl / v_case) if v_cl is not None and v_case else None
    if n_clusters >= min_clusters:
        if ratio is None:
            return 1.0, (f"1: no variance between cases to compare ({n_clusters} clusters)"), n_clusters
        return max(1.0, ratio), f"cluster/case bootstrap variance ratio ({n_clusters} clusters)", n_clusters
    kish = _kish_design_effect(num_a / den_a, cl)
    candidates = [x for x in (ratio, kish) if x is not None]
    if not candidates:
        return 1.0, (f"1: no variance between cases to compare ({n_clusters} clusters "
                     f"< {min_clusters})"), n_clusters
    return (max(1.0, *candidates),
            (f"larger of the cluster/case bootstrap variance ratio and Kish's 1 + (m - 1) * ICC "
             f"({n_clusters} clusters < {min_clusters})"), n_clusters)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b (pass→fail) and c (fail→pass) discordant pairs.

    >>> round(mcnemar_exact(1, 9), 4)
    0.0215
    >>> mcnemar_exact(0, 0)
    1.0
    """
    if b == c:  # (0, 0) included: nothing discordant, or the most likely split
        return 1.0
    # the binomial(n, 1/2) is symmetric: the outcomes at least as unlikely as the observed one
    # are both tails beyond it, p = 2 P(X <= min(b, c)). scipy.special's binomial CDF is the
    # one scipy.stats.binomtest uses, without importing scipy.stats (0.6-1.5 s). Imported here,
    # not at the top: only a paired diff needs it, every process that scores imports this module
    from scipy.special import bdtr

    return float(min(1.0, 2.0 * bdtr(min(b, c), b + c, 0.5)))


def cases_needed(delta: float, discordance: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Paired cases needed to detect an accuracy difference ``delta`` (see POWER_FORMULA).

    ``discordance`` is raised to ``delta`` when lower (a difference of delta needs at least
    that share of disagreeing cases).
    """
    if not 0 < delta < 1:
        raise InputError("delta must be in (0, 1)")
    p_d = min(1.0, max(discordance, delta))
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    var = max(p_d - delta * delta, 1e-12)
    return int(math.ceil(z * z * var / (delta * delta)))
