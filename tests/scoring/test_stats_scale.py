"""The bootstrap at scale: drawn in blocks of rows, never as one resamples x cases matrix,
with the same intervals as the one-matrix computation (written out here independently)."""

import numpy as np
import pytest

from sqleval_pipeline.scoring import stats


def one_matrix_interval(num, den, resamples, seed, level=0.95):
    """The textbook percentile cluster bootstrap: one (resamples x units) index matrix."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    idx = np.random.default_rng(seed).integers(0, len(num), size=(resamples, len(num)))
    n, d = num[idx].sum(axis=1), den[idx].sum(axis=1)
    draws = (n / np.where(d > 0, d, 1))[d > 0]
    a = (1 - level) / 2
    return tuple(float(x) for x in np.quantile(draws, [a, 1 - a]))


@pytest.mark.parametrize("units", [1, 7, 333, 5000])
def test_blocked_bootstrap_gives_the_one_matrix_interval(monkeypatch, units):
    rng = np.random.default_rng(units)
    den = rng.integers(0, 4, size=units).astype(float)
    num = np.minimum(den, rng.integers(0, 4, size=units))
    if den.sum() == 0:
        den[0] = 1
    monkeypatch.setattr(stats, "CHUNK_CELLS", 1000)  # many small blocks, a ragged last one
    got = stats.cluster_bootstrap_ratio(num, den, resamples=301, seed=11)
    assert got == pytest.approx(one_matrix_interval(num, den, 301, 11), abs=0)


def test_paired_bootstrap_draws_the_same_clusters_for_both_sides_in_blocks(monkeypatch):
    rng = np.random.default_rng(3)
    den = np.full(400, 3.0)
    nb, nc = rng.integers(0, 4, size=400), rng.integers(0, 4, size=400)
    monkeypatch.setattr(stats, "CHUNK_CELLS", 1 << 30)
    whole = stats.paired_bootstrap_delta(nb, den, nc, den, resamples=500, seed=5)
    monkeypatch.setattr(stats, "CHUNK_CELLS", 777)
    blocked = stats.paired_bootstrap_delta(nb, den, nc, den, resamples=500, seed=5)
    assert blocked == whole
    # identical sides: every paired draw is exactly zero (the same clusters on both sides)
    assert stats.paired_bootstrap_delta(nb, den, nb, den, resamples=200, seed=5) == (0.0, 0.0)


def test_index_blocks_stay_small_whatever_the_number_of_cases():
    blocks = list(stats._index_chunks(np.random.default_rng(0), 50_000, 2000))
    assert sum(len(b) for b in blocks) == 2000
    assert max(b.size for b in blocks) <= max(stats.CHUNK_CELLS, 50_000)
