"""Statistics for scorecards: cluster bootstrap, paired bootstrap, McNemar, sample size.

All resampling is seeded (``numpy.random.default_rng(seed)``) so the same grades always give
the same intervals.

>>> low, high = cluster_bootstrap_ratio([3, 1], [3, 3], resamples=500, seed=1)
>>> 0 <= low <= 4 / 6 <= high <= 1
True
>>> cases_needed(0.03, 0.112)  # Miller's worked example: ~969 paired questions
969
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

DEFAULT_SEED = 20240917
DEFAULT_RESAMPLES = 2000
LEVEL = 0.95

POWER_FORMULA = (
    "n = ceil((z_{1-alpha/2} + z_{power})^2 * (p_d - delta^2) / delta^2), where p_d is the "
    "share of cases on which the two configurations disagree (discordance) and delta the "
    "difference in accuracy; the variance of a per-case paired difference in {-1, 0, 1} is "
    "p_d - delta^2. Clustered: n * design effect (cluster-bootstrap variance / case-bootstrap "
    "variance, floored at 1). Without a pairing, p_d defaults to 2p(1-p) at the observed "
    "accuracy p (two configurations failing independently: conservative)."
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


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b (pass→fail) and c (fail→pass) discordant pairs.

    >>> round(mcnemar_exact(1, 9), 4)
    0.0215
    >>> mcnemar_exact(0, 0)
    1.0
    """
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest  # 0.6 s to import: only when a diff needs it

    return float(binomtest(c, b + c, 0.5, alternative="two-sided").pvalue)


def cases_needed(delta: float, discordance: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Paired cases needed to detect an accuracy difference ``delta`` (see POWER_FORMULA).

    ``discordance`` is raised to ``delta`` when lower (a difference of delta needs at least
    that share of disagreeing cases).
    """
    if not 0 < delta < 1:
        raise ValueError("delta must be in (0, 1)")
    p_d = min(1.0, max(discordance, delta))
    from scipy.stats import norm

    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    var = max(p_d - delta * delta, 1e-12)
    return int(math.ceil(z * z * var / (delta * delta)))
