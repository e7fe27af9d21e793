"""Ties at a LIMIT cut (docs/grading.md, "Rows, order and ties").

When the reference's ``ORDER BY … LIMIT k`` cuts through rows tied on all its ORDER BY keys,
freezing records the tie group (:class:`~sqleval_pipeline.golden.model.TieAtCut`): the frozen
rows ``[before, before + take)`` may be *any* ``take`` rows of the group. A :class:`Cut` is that
record decoded; a :class:`Shape` gathers the cuts and the rank groups of one accepted result.

The comparison itself is never re-implemented here: :func:`selections` builds, for one
candidate, the expected rows with each cut's rows replaced by the tied rows that best match the
candidate's rows, and the caller compares the candidate with that *legitimate* expected result
by the ordinary rules (so every tolerance and both readings apply unchanged, and a candidate is
never accepted against rows that are not a right answer). Rows are chosen first by equal
canonical values column by column (the exact reading), then by the multiset of a row's values
(got-the-facts: extra and reordered candidate columns), and the rows left over by closeness.

>>> from sqleval_pipeline.results import ResultSet
>>> e = ResultSet(columns=["name"], types=["VARCHAR"], rows=[["Ann"]])
>>> g = ResultSet(columns=["name"], types=["VARCHAR"], rows=[["Bob"]])
>>> cut = Cut(before=0, take=1, pool=[["Ann"], ["Bob"], ["Cy"]])
>>> next(selections(e, g, [cut]))
[['Bob']]
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqleval_pipeline.grading.values import canonical_key
from sqleval_pipeline.results import ResultSet

if TYPE_CHECKING:  # pragma: no cover
    from sqleval_pipeline.golden.model import Case, EncodedResult

#: pairs (left-over candidate row, unused tied row) scored at most per cut before the rest of
#: the slots are filled in the recorded order (keeps a pathological case off the hot path)
_SCORE_BUDGET = 50_000


@dataclass(frozen=True)
class Cut:
    """Expected rows ``[before, before + take)`` may be any ``take`` rows of ``pool`` (decoded).

    ``truncated``: the tie group has more rows than ``pool`` holds; only these are accepted.
    """

    before: int
    take: int
    pool: Sequence[Sequence[Any]]
    truncated: bool = False


@dataclass(frozen=True)
class Shape:
    """The tie structure of one accepted result: rank groups (or None) and cuts."""

    order_groups: Sequence[int] | None = None
    cuts: tuple[Cut, ...] = field(default=())


def shape_of(result: EncodedResult) -> Shape | None:
    """The :class:`Shape` of a frozen result; None when it has neither cuts nor rank groups."""
    tie, offset, groups = result.tie, result.tie_at_offset, result.order_groups
    if tie is None and offset is None and groups is None:
        return None
    cuts = tuple(Cut(t.before, t.take, t.decoded_rows(result.types), t.truncated)
                 for t in (offset, tie) if t is not None)
    return Shape(order_groups=groups, cuts=cuts)


def case_shapes(case: Case) -> list[Shape | None] | None:
    """One :class:`Shape` (or None) per accepted result of ``case``, in the order of
    ``case.accepted_results()``; None when no accepted result has any (the common case)."""
    if case.expected is None:
        return None
    results = [case.expected, *case.expected.alternatives]
    shapes = [shape_of(r) for r in results]
    return shapes if any(s is not None for s in shapes) else None


def merged_groups(groups: Sequence[int], cuts: Sequence[Cut]) -> list[int]:
    """``groups`` with the rows of each cut in one group (tied rows come in any order),
    renumbered 0, 1, … in row order.

    >>> merged_groups([0, 1, 2, 3, 4], [Cut(before=3, take=2, pool=[[1], [2], [3]])])
    [0, 1, 2, 3, 3]
    """
    cut_of = {}
    for n, c in enumerate(cuts):
        for i in range(c.before, c.before + c.take):
            cut_of[i] = n
    out: list[int] = []
    prev: Any = object()
    cur = -1
    for i, g in enumerate(groups):
        label = ("cut", cut_of[i]) if i in cut_of else ("group", g)
        if label != prev:
            cur += 1
            prev = label
        out.append(cur)
    return out


# --------------------------------------------------------------------------- choosing tied rows


def _keys(row: Sequence[Any]) -> tuple:
    return tuple(map(canonical_key, row))


def _num(k: Any) -> float | None:
    if isinstance(k, int | float | Decimal) and not isinstance(k, bool):
        try:
            f = float(k)
        except (OverflowError, ValueError):
            return None
        return f if math.isfinite(f) else None
    return None


def _closeness(a: tuple, b: tuple) -> float:
    """Sum of relative differences of the numbers that differ at the same position."""
    d = 0.0
    for x, y in zip(a, b, strict=False):
        if x != y:
            fx, fy = _num(x), _num(y)
            d += 1.0 if fx is None or fy is None else min(1.0, abs(fx - fy) / max(abs(fx), abs(fy), 1e-300))
    return d


def _positional_score(g: tuple, p: tuple) -> tuple[int, float]:
    return (sum(1 for x, y in zip(g, p, strict=False) if x == y), -_closeness(g, p))


def _bag_score(g: Counter, p: Counter) -> tuple[int, float]:
    return (sum((g & p).values()), 0.0)


def _fill(cut_picks: list[tuple[int | None, int]], take: int, pool_n: int, left: list[int],
          score) -> None:
    """Fill the missing slots of one cut from unused tied rows, best-scoring pairs first."""
    missing = take - len(cut_picks)
    if missing <= 0:
        return
    used_p = {p for _g, p in cut_picks}
    free = [p for p in range(pool_n) if p not in used_p]
    pairs: list[tuple[tuple, int, int]] = []
    if left and len(left) * len(free) <= _SCORE_BUDGET:
        pairs = sorted(((score(g, p), g, p) for g in left for p in free), key=lambda t: t[0], reverse=True)
    taken_g: set[int] = set()
    taken_p: set[int] = set()
    for _s, g, p in pairs:
        if missing == 0:
            break
        if g in taken_g or p in taken_p:
            continue
        taken_g.add(g)
        taken_p.add(p)
        cut_picks.append((g, p))
        missing -= 1
    for p in free:
        if missing == 0:
            break
        if p not in taken_p:
            cut_picks.append((None, p))
            missing -= 1
    for g in taken_g:
        left.remove(g)


def _positional(expected: ResultSet, got: ResultSet, cuts: Sequence[Cut], fixed: list[int]
                ) -> list[list[tuple[int | None, int]]]:
    gkeys = [_keys(r) for r in got.rows]
    avail: dict[tuple, list[int]] = defaultdict(list)
    for i in range(len(gkeys) - 1, -1, -1):
        avail[gkeys[i]].append(i)
    used: set[int] = set()
    for i in fixed:
        lst = avail.get(_keys(expected.rows[i]))
        if lst:
            used.add(lst.pop())
    picks: list[list[tuple[int | None, int]]] = []
    pkeys: list[list[tuple]] = []
    for cut in cuts:
        keys = [_keys(r) for r in cut.pool]
        pkeys.append(keys)
        mine: list[tuple[int | None, int]] = []
        for p, k in enumerate(keys):
            if len(mine) == cut.take:
                break
            lst = avail.get(k)
            if lst:
                g = lst.pop()
                used.add(g)
                mine.append((g, p))
        picks.append(mine)
    left = [g for g in range(len(gkeys)) if g not in used]
    for cut, mine, keys in zip(cuts, picks, pkeys, strict=True):
        _fill(mine, cut.take, len(cut.pool), left, lambda g, p, keys=keys: _positional_score(gkeys[g], keys[p]))
    return picks


def _by_values(expected: ResultSet, got: ResultSet, cuts: Sequence[Cut], fixed: list[int]
               ) -> list[list[tuple[int | None, int]]]:
    gbags = [Counter(_keys(r)) for r in got.rows]
    index: dict[Any, list[int]] = defaultdict(list)
    for g, bag in enumerate(gbags):
        for k in bag:
            index[k].append(g)
    used: set[int] = set()

    def claim(bag: Counter) -> int | None:
        if not bag:
            return None
        rare = min(bag, key=lambda k: len(index.get(k, ())))
        for g in index.get(rare, ()):
            if g not in used and all(gbags[g][k] >= c for k, c in bag.items()):
                used.add(g)
                return g
        return None

    for i in fixed:
        claim(Counter(_keys(expected.rows[i])))
    picks: list[list[tuple[int | None, int]]] = []
    pbags_all: list[list[Counter]] = []
    for cut in cuts:
        pbags = [Counter(_keys(r)) for r in cut.pool]
        pbags_all.append(pbags)
        mine: list[tuple[int | None, int]] = []
        for p, bag in enumerate(pbags):
            if len(mine) == cut.take:
                break
            g = claim(bag)
            if g is not None:
                mine.append((g, p))
        picks.append(mine)
    left = [g for g in range(len(gbags)) if g not in used]
    for cut, mine, pbags in zip(cuts, picks, pbags_all, strict=True):
        _fill(mine, cut.take, len(cut.pool), left, lambda g, p, pbags=pbags: _bag_score(gbags[g], pbags[p]))
    return picks


def _rows_for(expected: ResultSet, cuts: Sequence[Cut], picks: list[list[tuple[int | None, int]]]
              ) -> list[list[Any]]:
    rows = list(expected.rows)
    for cut, mine in zip(cuts, picks, strict=True):
        # in the candidate's order (any order is right among tied rows; this reads better)
        ordered = sorted(mine, key=lambda gp: (gp[0] is None, gp[0] if gp[0] is not None else 0))
        rows[cut.before: cut.before + cut.take] = [list(cut.pool[p]) for _g, p in ordered]
    return rows


def selections(expected: ResultSet, got: ResultSet, cuts: Sequence[Cut]) -> Iterator[list[list[Any]]]:
    """Expected rows specific to ``got``: each cut's rows replaced by ``take`` tied rows chosen
    to match ``got``'s rows; first column by column (when the column counts agree), then by the
    values a row holds. A selection equal to one already yielded (or to the frozen rows) is
    skipped. Every yielded result is a right answer of the case."""
    covered = {i for c in cuts for i in range(c.before, c.before + c.take)}
    fixed = [i for i in range(len(expected.rows)) if i not in covered]
    seen = [expected.rows]
    strategies = [_positional, _by_values] if len(got.columns) == len(expected.columns) else [_by_values]
    for strategy in strategies:
        rows = _rows_for(expected, cuts, strategy(expected, got, cuts, fixed))
        if any(rows == s for s in seen):
            continue
        seen.append(rows)
        yield rows
