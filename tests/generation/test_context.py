import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline.configs import ContextSettings
from sqleval_pipeline.generation.context import BM25, ContextBuilder, Doc, load_catalog, tokens
from sqleval_pipeline.semantic.glossary import load_glossary
from sqleval_pipeline.golden import load_golden


@pytest.fixture(scope="module")
def catalog(serving_snapshot):
    return load_catalog(serving_snapshot.path, serving_snapshot.manifest.as_of, models_dir=location.DBT_PROJECT_DIR / "models")


@pytest.fixture(scope="module")
def golden():
    return load_golden(location.GOLDEN_DIR)


def builder(catalog, golden, **settings):
    return ContextBuilder(catalog, ContextSettings(**settings), load_glossary(location.GLOSSARY_PATH), golden.cases,
                          location.REPO_ROOT / "evals/prompts/text_to_sql_v1.j2")


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


def _brute_scores(docs, query, k1=1.2, b=0.75):
    """Okapi BM25 written out directly over every document (the reference)."""
    import math
    from collections import Counter

    toks = [tokens(d.text) for d in docs]
    avgdl = sum(map(len, toks)) / len(toks)
    df = Counter(t for ts in toks for t in set(ts))
    idf = {t: math.log(1 + (len(docs) - f + 0.5) / (f + 0.5)) for t, f in df.items()}
    out = []
    for ts in toks:
        tf = Counter(ts)
        out.append(sum(idf[t] * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(ts) / avgdl))
                       for t in tokens(query) if t in tf))
    return out


def test_bm25_index_ranks_exactly_like_the_direct_formula():
    import random

    rng = random.Random(5)
    words = [f"w{i}" for i in range(40)]
    docs = [Doc(rng.choice(["table", "example"]), f"d{i}", " ".join(rng.choices(words, k=rng.randint(1, 12))))
            for i in range(300)]
    idx = BM25(docs)
    for _ in range(50):
        query = " ".join(rng.choices(words, k=rng.randint(1, 6)))
        brute = _brute_scores(docs, query)
        sparse = idx.scores(query)
        assert {i: s for i, s in enumerate(brute) if s > 0} == {i: float(s) for i, s in enumerate(sparse) if s > 0}
        for kind in (None, "table", "example"):
            expected = sorted(((-s, i) for i, s in enumerate(brute)
                               if s > 0 and (kind is None or docs[i].kind == kind)))[:7]
            assert [d.key for d in idx.top(query, 7, kind)] == [docs[i].key for _s, i in expected]


def test_each_case_context_is_built_once_under_concurrency(catalog, monkeypatch):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    builder = ContextBuilder(catalog, ContextSettings(curation=False), None, [])
    calls = []
    real = builder._context
    gate = threading.Event()

    def slow(case_id, question):
        calls.append(case_id)
        gate.wait(0.2)
        return real(case_id, question)

    monkeypatch.setattr(builder, "_context", slow)
    with ThreadPoolExecutor(8) as pool:
        out = list(pool.map(lambda r: builder.build(f"q{r % 2}", f"question {r % 2}", r), range(16)))
    assert sorted(calls) == ["q0", "q1"]
    assert [c.run_index for c in out] == list(range(16))


def test_a_generator_that_reads_only_the_question_gets_no_retrieval(catalog, golden):
    b = ContextBuilder(catalog, ContextSettings(), load_glossary(location.GLOSSARY_PATH), golden.cases, retrieval=False)
    ctx = b.build(golden.cases[0].id, golden.cases[0].question, 2)
    assert b.index is None and ctx.schema_context == "" and ctx.examples == [] and ctx.prompt is None
    assert (ctx.question, ctx.run_index) == (golden.cases[0].question, 2)
