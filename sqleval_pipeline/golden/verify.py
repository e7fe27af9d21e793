"""Verification of frozen expected results: re-run every reference on the pinned snapshot and
compare with what was frozen. Any difference is *snapshot drift* (docs/golden-set.md): the
evaluation stops until someone decides whether the data or the case is wrong. A re-run that
keeps other rows of a recorded tie group is not drift.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqleval_pipeline.golden.freeze import FreezeError, canon, freeze_reading, run_reference
from sqleval_pipeline.golden.model import Case, EncodedResult
from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.snapshot import open_readonly


def canon_rows(rs: ResultSet, order_matters: bool, order_keys: list[str],
                groups: list[int] | None = None) -> list:
    rows = [tuple(canon(v) for v in r) for r in rs.rows]
    if not order_matters:
        return sorted(rows, key=repr)
    idx = [rs.columns.index(k) for k in order_keys if k in rs.columns]
    out: list[list] = []
    last = object()
    for n, r in enumerate(rows):
        key = groups[n] if groups is not None else tuple(r[i] for i in idx)
        if key != last:
            out.append([])
            last = key
        out[-1].append(r)
    return [sorted(g, key=repr) for g in out]


def same_result(a: ResultSet, b: ResultSet, order_matters: bool, order_keys: list[str], *,
                groups: list[int] | None = None) -> str | None:
    """None when ``b`` reproduces ``a`` exactly (ties on order keys aside), else why not.

    ``groups`` (rank group per row of both) replaces ``order_keys`` when given.

    >>> a = ResultSet(columns=["k"], types=["VARCHAR"], rows=[["x"], ["y"]])
    >>> b = ResultSet(columns=["k"], types=["VARCHAR"], rows=[["y"], ["x"]])
    >>> same_result(a, b, False, []) is None, same_result(a, b, True, [], groups=[0, 0]) is None
    (True, True)
    >>> same_result(a, b, True, [], groups=[0, 1])
    "first difference at row 0: (('str', 'x'),) → (('str', 'y'),)"
    """
    if a.columns != b.columns:
        return f"columns {a.columns} → {b.columns}"
    if a.types != b.types:
        return f"types {a.types} → {b.types}"
    if a.row_count != b.row_count:
        return f"{a.row_count} rows → {b.row_count} rows"
    ca, cb = canon_rows(a, order_matters, order_keys, groups), canon_rows(b, order_matters, order_keys, groups)
    if ca != cb:
        flat_a = [r for g in ca for r in (g if order_matters else [g])]
        flat_b = [r for g in cb for r in (g if order_matters else [g])]
        for i, (x, y) in enumerate(zip(flat_a, flat_b, strict=False)):
            if x != y:
                return f"first difference at row {i}: {a.rows[i] if not order_matters else x} → " \
                       f"{b.rows[i] if not order_matters else y}"
        return "rows differ"
    return None


def has_structure(enc: EncodedResult) -> bool:
    return enc.tie is not None or enc.tie_at_offset is not None or enc.order_groups is not None


def same_frozen(frozen: EncodedResult, now: EncodedResult, order_matters: bool,
                order_keys: list[str]) -> str | None:
    """None when ``now`` (the reading frozen again) reproduces ``frozen``: the same columns,
    types and rows, except that the rows kept from a tie group at a cut may be other rows of
    that group; the same tie groups (rows, how many kept, where) and rank groups. Else why not.
    """
    a, b = frozen.decode(), now.decode()
    if a.columns != b.columns or a.types != b.types or a.row_count != b.row_count:
        return same_result(a, b, order_matters, order_keys)
    for name, label in (("tie_at_offset", "tie at the OFFSET cut"), ("tie", "tie at the LIMIT cut")):
        ta, tb = getattr(frozen, name), getattr(now, name)
        if ta is None and tb is None:
            continue
        if ta is None or tb is None:
            size = (f"{len(t.rows)}{'+' if t.truncated else ''} tied rows" if t is not None else "none"
                    for t in (ta, tb))
            return f"{label}: {next(size)} → {next(size)}"
        if (ta.before, ta.take) != (tb.before, tb.take):
            return (f"{label}: rows {ta.before + 1}-{ta.before + ta.take} kept from the group → rows "
                    f"{tb.before + 1}-{tb.before + tb.take}")
        if len(ta.rows) != len(tb.rows) or ta.truncated != tb.truncated:
            return (f"{label}: {len(ta.rows)}{'+' if ta.truncated else ''} tied rows → "
                    f"{len(tb.rows)}{'+' if tb.truncated else ''}")
        pa = sorted((tuple(canon(v) for v in r) for r in ta.decoded_rows(frozen.types)), key=repr)
        pb = sorted((tuple(canon(v) for v in r) for r in tb.decoded_rows(now.types)), key=repr)
        if pa != pb:
            x, y = next((x, y) for x, y in zip(pa, pb, strict=True) if x != y)
            return f"{label}: the tied rows differ, e.g. {x} → {y}"
    if frozen.order_groups != now.order_groups:
        return f"rank groups of the rows {frozen.order_groups} → {now.order_groups}"
    covered = {i for t in (frozen.tie_at_offset, frozen.tie) if t is not None
               for i in range(t.before, t.before + t.take)}
    keep = [i for i in range(a.row_count) if i not in covered]
    fa = ResultSet(columns=a.columns, types=a.types, rows=[a.rows[i] for i in keep])
    fb = ResultSet(columns=b.columns, types=b.types, rows=[b.rows[i] for i in keep])
    groups = [frozen.order_groups[i] for i in keep] if frozen.order_groups is not None else None
    return same_result(fa, fb, order_matters, order_keys, groups=groups)


def unrecorded_tie(con, sql: str, now: ResultSet, as_of: dt.date, order_matters: bool) -> str:
    """A hint when a re-run differs from a frozen result that records no tie, but has one."""
    try:
        again = freeze_reading(con, sql, now, as_of, order_matters=order_matters).result
    except FreezeError:
        return ""
    tie = again.tie or again.tie_at_offset
    if tie is None:
        return ""
    return (f" (the cut goes through {len(tie.rows)} rows tied on {', '.join(tie.keys)}, which the "
            "frozen result does not record: re-freeze the case to record the tie)")


@dataclass
class Drift:
    case_id: str
    reading: str  # "reference_sql" or "alternative_sqls[i]"
    detail: str

    def __str__(self) -> str:
        return f"{self.case_id} ({self.reading}): {self.detail}"


def verify_cases(cases: list[Case], serving: Path, snapshot_id: str, as_of: dt.date) -> list[Drift]:
    """Re-run every frozen reference on the snapshot; return the drifts (empty = reproduced).

    A reading whose frozen result records ties (a tie group at a cut, rank groups) is frozen
    again and compared by :func:`same_frozen`: keeping other rows of a tie group is not drift.
    """
    drifts: list[Drift] = []
    con = open_readonly(serving)
    try:
        for case in cases:
            if not case.answerable or not case.reference_sql:
                continue
            if case.expected is None:
                if case.status != "verified":
                    continue  # not reviewed: execution-only until a reviewer accepts and freezes it
                drifts.append(Drift(case.id, "expected", "not frozen; run `sqleval golden freeze`"))
                continue
            if case.snapshot_id != snapshot_id:
                drifts.append(Drift(case.id, "snapshot_id", f"frozen against {case.snapshot_id}, "
                                    f"the pinned snapshot is {snapshot_id}"))
                continue
            frozen = case.accepted_results()
            for i, sql in enumerate([case.reference_sql, *case.alternative_sqls]):
                label = "reference_sql" if i == 0 else f"alternative_sqls[{i - 1}]"
                try:
                    now = run_reference(con, sql, as_of)
                except Exception as exc:
                    drifts.append(Drift(case.id, label, f"failed: {exc}"))
                    continue
                if i >= len(frozen):
                    drifts.append(Drift(case.id, label, "no frozen result; re-freeze"))
                    continue
                enc = ([case.expected, *case.expected.alternatives])[i]
                if not has_structure(enc):
                    why = same_result(frozen[i], now, case.order_matters, case.order_keys)
                    if why:
                        why += unrecorded_tie(con, sql, now, as_of, case.order_matters)
                else:
                    # ties recorded: freeze the reading again and compare what is recorded (a
                    # re-run keeping other rows of a tie group is not drift)
                    try:
                        again = freeze_reading(con, sql, now, as_of, order_matters=case.order_matters)
                    except FreezeError as exc:
                        drifts.append(Drift(case.id, label, str(exc)))
                        continue
                    why = same_frozen(enc, again.result, case.order_matters, case.order_keys)
                if why:
                    drifts.append(Drift(case.id, label, why))
    finally:
        con.close()
    return drifts
