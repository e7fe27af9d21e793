"""Counts of the golden set per difficulty × band × split, and its coverage rules (docs/golden-set.md)."""

from __future__ import annotations

from collections import Counter

from sqleval_pipeline.golden.model import BANDS, DIFFICULTIES, SPLITS, Case
from sqleval_pipeline.textfiles import visible_text

MIN_VERIFIED = 30


def counts(cases: list[Case]) -> Counter:
    return Counter((c.difficulty, c.band, c.split) for c in cases)


def _difficulties(cases: list[Case], difficulties: tuple[str, ...] | None) -> list[str]:
    base = list(difficulties or DIFFICULTIES)
    return base + sorted({c.difficulty for c in cases} - set(base))


def stats_rows(cases: list[Case], difficulties: tuple[str, ...] | None = None) -> list[list[str]]:
    """One row per difficulty (the project's taxonomy): counts per band (dev/heldout), then
    the total."""
    cnt = counts(cases)
    rows = []
    for d in _difficulties(cases, difficulties):
        row = [d]
        for b in BANDS:
            dev, held = cnt[(d, b, "dev")], cnt[(d, b, "heldout")]
            row.append(f"{dev}/{held}")
        row.append(str(sum(v for (dd, _b, _s), v in cnt.items() if dd == d)))
        rows.append(row)
    total = ["total"]
    for b in BANDS:
        dev = sum(v for (_d, bb, s), v in cnt.items() if bb == b and s == "dev")
        held = sum(v for (_d, bb, s), v in cnt.items() if bb == b and s == "heldout")
        total.append(f"{dev}/{held}")
    total.append(str(len(cases)))
    rows.append(total)
    return rows


STATS_HEADER = ["difficulty", *BANDS, "total"]
"""Band cells read ``dev/heldout``."""


@visible_text
def stats_markdown(cases: list[Case], difficulties: tuple[str, ...] | None = None) -> str:
    lines = ["| " + " | ".join(STATS_HEADER) + " |", "|" + "---|" * len(STATS_HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in stats_rows(cases, difficulties)]
    by_status = Counter(c.status for c in cases)
    lines.append("")
    lines.append("status: " + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items())))
    return "\n".join(lines)


def validate_coverage(cases: list[Case], difficulties: tuple[str, ...] | None = None) -> list[str]:
    """Shortfalls against the coverage rules (docs/golden-set.md) (at least 30 verified cases spread across every difficulty
    and band, and held-out cases present); empty when the set is adequate."""
    verified = [c for c in cases if c.status == "verified"]
    problems = []
    if len(verified) < MIN_VERIFIED:
        problems.append(f"{len(verified)} verified cases; at least {MIN_VERIFIED} are needed")
    for d in difficulties or DIFFICULTIES:
        if not any(c.difficulty == d for c in verified):
            problems.append(f"no verified case of difficulty '{d}'")
    for b in BANDS:
        if not any(c.band == b for c in verified):
            problems.append(f"no verified case in band '{b}'")
    for s in SPLITS:
        if not any(c.split == s for c in verified):
            problems.append(f"no verified case in split '{s}'")
    return problems
