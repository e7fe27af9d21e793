"""Fixtures for the judge lane: small hand-made judge inputs (the Anthropic fake is in tests/conftest.py)."""

from __future__ import annotations


import pytest

from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.judging.base import JudgeInput
from sqleval_pipeline.pipeline.records import Attempt, Execution, Grade
from sqleval_pipeline.results import ResultSet

QUESTION = "What was net revenue from UPI orders last month?"
REFERENCE_SQL = ("SELECT sum(revenue_inr) FROM marts.mart_orders_daily "
                 "WHERE payment_method = 'unified_payments' AND order_date >= DATE '2025-05-01'")
SYSTEM_SQL = ("SELECT sum(revenue_inr) FROM marts.mart_orders_daily "
              "WHERE payment_method = 'upi' AND order_date >= DATE '2025-05-01'")


def make_item(case_id: str = "q07", run_index: int = 0, *, rows: int = 10,
              kind: str = "sql", outcome: str = "WRONG", config_version: str = "cfgv1",
              band: str = "answerable") -> JudgeInput:
    """A failed attempt with ``rows`` expected rows (``EXP-ROW-nn``) and returned rows (``GOT-ROW-nn``)."""
    case = Case.model_validate({
        "id": case_id, "question": QUESTION,
        "reference_sql": REFERENCE_SQL if band != "should_refuse" else None,
        "expected": None if band == "should_refuse" else {
            "columns": ["day", "revenue_inr"], "types": ["VARCHAR", "DECIMAL(18,2)"],
            "rows": [[f"EXP-ROW-{i:02d}", f"{1000 + i}.50"] for i in range(rows)]},
        "difficulty": "trap", "band": band, "traps": ["payment alias"], "cluster": "revenue",
        "split": "dev", "status": "verified",
        "provenance": {"source": "user questions", "author": "asha"},
    })
    key = {"config_version": config_version, "case_id": case_id, "run_index": run_index}
    if kind == "sql":
        attempt = Attempt(**key, kind="sql", sql=SYSTEM_SQL, model="claude-sonnet-4-5")
        execution = Execution(**key, status="ok", result=ResultSet(
            columns=["day", "revenue_inr"], types=["VARCHAR", "DOUBLE"],
            rows=[[f"GOT-ROW-{i:02d}", 7.0 + i] for i in range(rows)]))
        reason, mismatch = "result_mismatch:values", f"{rows} expected row(s) missing, {rows} unexpected row(s)"
    else:
        attempt = Attempt(**key, kind="refusal", refusal_reason="payment method UPI is not in the schema")
        execution = None
        reason, mismatch = "over_refusal", attempt.refusal_reason
    grade = Grade(**key, outcome=outcome, reason=reason, mismatch=mismatch, grader_version="g1",
                  band=band, difficulty="trap", split="dev", cluster="revenue")
    return JudgeInput(case=case, attempt=attempt, execution=execution, grade=grade)
