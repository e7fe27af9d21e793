"""Growing the golden set: a production wrong-answer report becomes a case in one command.

``add_case`` takes the question and (usually) the corrected SQL a person wrote, checks that the
SQL is a single read-only query over served tables (the guard's statement filter), freezes its
result on the pinned snapshot, and appends the case to the domain file. Without SQL the case
is ``unverified``: it still runs and gets an execution-only score until someone reviews it.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from sqleval_pipeline.golden.freeze import freeze_case
from sqleval_pipeline.golden.loader import GoldenChanged, load_golden, write_cases
from sqleval_pipeline.golden.model import Case, Provenance
from sqleval_pipeline.snapshot import list_serving_objects, open_readonly
from sqleval_pipeline.errors import SqlevalError
from sqleval_pipeline.guard.policy import load_policy
from sqleval_pipeline.guard.statement_filter import StatementFilter


class GrowthError(SqlevalError, ValueError):
    pass


def next_id(existing: list[str], prefix: str) -> str:
    """The next free ``<prefix>-NNN`` id.

    >>> next_id(["com-001", "com-068", "other-9"], "com")
    'com-069'
    """
    nums = [int(m.group(1)) for i in existing if (m := re.fullmatch(rf"{re.escape(prefix)}-(\d+)", i))]
    width = max((len(i.split("-")[-1]) for i in existing if i.startswith(prefix + "-")), default=3)
    return f"{prefix}-{(max(nums) + 1 if nums else 1):0{width}d}"


def add_case(
    golden_file: Path, *, question: str, sql: str | None, difficulty: str, band: str,
    cluster: str, serving: Path, snapshot_id: str, as_of: dt.date, split: str = "dev",
    order_matters: bool = False, traps: list[str] | None = None, case_id: str | None = None,
    source: str = "production wrong-answer report", author: str = "unknown",
    reviewer: str | None = None, alternative_sqls: list[str] | None = None,
    policy=None,
) -> Case:
    """Validate, freeze and append one case; return it. Nothing is written on any error.
    ``policy`` is the project's guard policy (default: the bundled one over the tables the
    serving file holds)."""
    before = golden_file.read_bytes() if golden_file.exists() else None
    existing = load_golden(golden_file).cases if golden_file.exists() else []
    ids = [c.id for c in existing]
    if case_id is None:
        case_id = next_id(ids, golden_file.stem[:3] if not ids else ids[0].rsplit("-", 1)[0])
    if case_id in ids:
        raise GrowthError(f"case id {case_id!r} already exists in {golden_file}")
    status = "verified" if (sql or band == "should_refuse") and reviewer else "unverified"
    if sql:
        if policy is None:
            objects = list_serving_objects(serving)
            policy = load_policy(served=[o[2] for o in objects if o[1] == "main"], schemas=["main"])
        statement_filter = StatementFilter(policy, database_names={snapshot_id})
        for i, text in enumerate([sql, *(alternative_sqls or [])]):
            verdict = statement_filter.check(text)
            if not verdict.allowed:
                which = "sql" if i == 0 else f"alternative {i}"
                raise GrowthError(f"the {which} is not a query the snapshot can serve: "
                                  f"{verdict.reason}: {verdict.message}")
    try:
        case = Case(
            id=case_id, question=question, reference_sql=sql if band != "should_refuse" else None,
            alternative_sqls=alternative_sqls or [], difficulty=difficulty, band=band,
            traps=traps or [], order_matters=order_matters, cluster=cluster, split=split,
            status=status,
            provenance=Provenance(source=source, author=author, reviewer=reviewer,
                                  date=dt.date.today()),
        )
    except ValueError as exc:
        raise GrowthError(str(exc)) from exc
    con = open_readonly(serving)
    try:
        case = freeze_case(case, con, snapshot_id, as_of)
    finally:
        con.close()
    try:
        write_cases(golden_file, [*existing, case], before=before)
    except GoldenChanged as exc:
        raise GrowthError(str(exc)) from exc
    return case
