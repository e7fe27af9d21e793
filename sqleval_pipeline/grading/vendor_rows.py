"""The rows a vendor's own engine returned for its SQL (Genie with ``fetch_query_result``),
graded too and compared with sqleval's execution of the same SQL on the pinned snapshot.

The generator keeps those rows in the attempt's ``raw_response`` (``vendor_result``, a
:class:`~sqleval_pipeline.results.ResultSet` decoded from the vendor's strings by its column
types). For such an attempt the grade records:

* ``vendor_rows``: ``agree`` when the vendor's rows equal sqleval's result under the exact
  reading (same columns by position, same rows as a multiset; order only when the case says
  ``order_matters``), ``disagree`` otherwise (``vendor_mismatch`` says how), ``partial`` when
  the vendor sent only part of its rows, ``unreadable`` when they could not be read back;
  None when the vendor sent no rows or sqleval's execution returned none to compare with;
* ``vendor_outcome``: the vendor's rows graded against the case's expected result, as an
  execution would be (CORRECT, CORRECT_FACTS, WRONG), when the case has one.

A disagreement means the two engines answer the same SQL differently — the vendor's
warehouse holds other data than the pinned snapshot, or the SQL's translation changes its
meaning: the scorecard counts them so nobody takes one engine's rows for the other's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sqleval_pipeline.grading.outcomes import compare, compare_any
from sqleval_pipeline.grading.ties import case_shapes
from sqleval_pipeline.pipeline.records import Attempt, Execution
from sqleval_pipeline.pipeline.recordio import scratch_cursor
from sqleval_pipeline.results import ResultSet


def vendor_responses(attempts_path: Path) -> Iterator[tuple[tuple[str, str, int], str]]:
    """(attempt key, raw response) of the attempts whose raw response holds the vendor's
    rows, in stored order — the pipeline's streams leave raw responses out, so the grades
    stage walks this beside them (:func:`with_vendor_rows`). Read in the process's database
    for record files (DuckDB keeps insertion order by default)."""
    con = scratch_cursor()
    try:
        cur = con.execute("SELECT config_version, case_id, run_index, raw_response FROM read_parquet(?) "
                          "WHERE kind = 'sql' AND contains(raw_response, '\"vendor_result')",
                          [str(attempts_path)])
        while rows := cur.fetchmany(64):
            for cv, cid, run, raw in rows:
                yield (cv, cid, run), raw
    finally:
        con.close()


def with_vendor_rows(attempts_path: Path, items: Iterable[tuple[Attempt, Execution | None]]
                     ) -> Iterator[tuple[Attempt, Execution | None]]:
    """``items`` (attempts in stored order, with their executions), each attempt given back
    its raw response when it holds the vendor's rows."""
    if not attempts_path.exists():
        yield from items
        return
    found = vendor_responses(attempts_path)
    pending = next(found, None)
    for a, ex in items:
        if pending is not None and pending[0] == a.key:
            a = a.model_copy(update={"raw_response": pending[1]})
            pending = next(found, None)
        yield a, ex


def vendor_result(attempt: Attempt) -> tuple[ResultSet | None, str | None]:
    """(the vendor's rows, or None; ``partial``/``unreadable`` when they cannot be compared)."""
    if attempt.kind != "sql" or not attempt.raw_response or "vendor_result" not in attempt.raw_response:
        return None, None
    try:
        record = json.loads(attempt.raw_response)
        rows = ResultSet.from_json(record["vendor_result"])
    except (ValueError, KeyError, TypeError):  # a record cut at its size limit, or damaged
        return None, "unreadable"
    return rows, "partial" if record.get("vendor_result_partial") else None


def vendor_fields(case: Any, attempt: Attempt, execution: Execution | None) -> dict[str, Any]:
    """The grade's vendor fields for one attempt (empty when the vendor sent no rows)."""
    rows, state = vendor_result(attempt)
    if rows is None and state is None:
        return {}
    if state is not None:
        return {"vendor_rows": state}
    out: dict[str, Any] = {}
    accepted = case.accepted_results() if case.answerable and case.status not in ("generated", "unverified") else []
    if accepted:
        c = compare_any(accepted, rows, case.order_matters, case.order_keys, case_shapes(case))
        out["vendor_outcome"] = "CORRECT" if c.exact else "CORRECT_FACTS" if c.facts else "WRONG"
    if execution is not None and execution.status == "ok" and execution.result is not None \
            and not execution.truncated:
        c = compare(execution.result, rows, case.order_matters, case.order_keys)
        out["vendor_rows"] = "agree" if c.exact else "disagree"
        if not c.exact:
            out["vendor_mismatch"] = (f"the vendor's rows differ from sqleval's execution of the same SQL: "
                                      f"{c.mismatch or c.exact_reason}")[:2000]
    return out
