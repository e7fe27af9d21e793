import pytest

from sqleval_pipeline import paths
from sqleval_pipeline.configs import ContextSettings
from sqleval_pipeline.generation.context import BM25, ContextBuilder, Doc, load_catalog, tokens
from sqleval_pipeline.glossary import load_glossary
from sqleval_pipeline.golden import load_golden


@pytest.fixture(scope="module")
def catalog(serving_snapshot):
    return load_catalog(serving_snapshot.path, serving_snapshot.manifest.as_of)


@pytest.fixture(scope="module")
def golden():
    return load_golden(paths.GOLDEN_DIR)


def builder(catalog, golden, **settings):
    return ContextBuilder(catalog, ContextSettings(**settings), load_glossary(), golden.cases,
                          paths.REPO_ROOT / "evals/prompts/text_to_sql_v1.j2")


def test_held_out_cases_never_feed_examples(catalog, golden):
    b = builder(catalog, golden, few_shot_examples=5)
    heldout = {c.id for c in golden.cases if c.split == "heldout"}
    assert heldout
    assert not heldout & {e.case_id for e in b.examples}
    for case in golden.cases:
        ctx = b.build(case.id, case.question, 0)
        ids = {e.case_id for e in ctx.examples}
        assert case.id not in ids, "a case must never see its own answer"
        assert not ids & heldout
        if case.reference_sql and not any(e.sql == case.reference_sql for e in ctx.examples):
            assert f"SQL: {case.reference_sql}\n" not in ctx.prompt, f"{case.id}: its own answer leaked"


def test_curation_controls_glossary_and_descriptions(catalog, golden):
    on = builder(catalog, golden).build("com-012", "How many orders were paid with UPI?", 0)
    off = builder(catalog, golden, curation=False).build("com-012", "How many orders were paid with UPI?", 0)
    assert "unified_payments" in on.glossary_context
    assert off.glossary_context is None
    assert "(= completed)" in on.schema_context or "completed" in on.schema_context
    assert "completed" not in off.schema_context
    assert "CREATE TABLE fct_orders" in off.schema_context


def test_schema_context_never_includes_free_text_or_sensitive_tables(catalog, golden):
    ctx = builder(catalog, golden, retrieval_k=0).build("x", "anything", 0)
    assert "Ignore all previous instructions" not in ctx.schema_context
    for forbidden in ("salaries", "employees", "customer_contacts", "phone"):
        assert forbidden not in ctx.schema_context


def test_prompt_is_rendered_with_as_of_and_question(catalog, golden):
    ctx = builder(catalog, golden).build("com-027", "How many orders were placed in the last 7 days?", 2)
    assert "Today is 2025-12-15" in ctx.prompt
    assert "Question: How many orders were placed in the last 7 days?" in ctx.prompt
    assert ctx.run_index == 2


def test_retrieval_prefers_the_relevant_table(catalog, golden):
    b = builder(catalog, golden, retrieval_k=2)
    ctx = b.build("q", "total refund amount by return reason", 0)
    assert "CREATE TABLE fct_returns" in ctx.schema_context


def test_bm25_basics():
    idx = BM25([Doc("t", "a", "orders payment method upi"), Doc("t", "b", "customers city segment")])
    assert [d.key for d in idx.top("which city has most customers", 1)] == ["b"]
    assert tokens("Refunds") == ["refund"]
