import duckdb
import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline.generation.base import GenerationContext
from sqleval_pipeline.generation.baseline import BaselineGenerator
from sqleval_pipeline.generation.context import load_catalog
from sqleval_pipeline.semantic.glossary import load_glossary
from sqleval_pipeline.golden import load_golden
from sqleval_pipeline.grading import compare
from sqleval_pipeline.guard.clock import pin_clock
from sqleval_pipeline.results import ResultSet
from sqleval_pipeline.snapshot import open_readonly


@pytest.fixture(scope="module")
def catalog(serving_snapshot):
    return load_catalog(serving_snapshot.path, serving_snapshot.manifest.as_of, models_dir=location.DBT_PROJECT_DIR / "models")


def ask(gen, q, as_of):
    return gen.generate(GenerationContext(case_id="x", run_index=0, question=q, as_of=as_of,
                                          schema_context=""))


def test_deterministic(catalog):
    golden = load_golden(location.GOLDEN_DIR)
    a = BaselineGenerator(catalog, load_glossary(location.GLOSSARY_PATH))
    b = BaselineGenerator(catalog, load_glossary(location.GLOSSARY_PATH))
    for c in golden.cases:
        x, y = ask(a, c.question, catalog.as_of), ask(b, c.question, catalog.as_of)
        assert (x.kind, x.sql, x.refusal_reason) == (y.kind, y.sql, y.refusal_reason)


def test_curation_resolves_aliases_the_raw_baseline_cannot(catalog):
    cur = ask(BaselineGenerator(catalog, load_glossary(location.GLOSSARY_PATH)), "How many orders were paid with UPI?", catalog.as_of)
    raw = ask(BaselineGenerator(catalog, None), "How many orders were paid with UPI?", catalog.as_of)
    assert "payment_method = 'unified_payments'" in cur.sql
    assert raw.kind == "refusal" or "unified_payments" not in (raw.sql or "")


def test_curated_baseline_declines_sensitive_questions(catalog):
    gen = BaselineGenerator(catalog, load_glossary(location.GLOSSARY_PATH))
    for q in ("What is the average salary of employees in Engineering?",
              "List the phone numbers of our premium customers."):
        out = ask(gen, q, catalog.as_of)
        assert out.kind == "refusal" and "not available" in out.refusal_reason


def _accuracy(gen, cases, con, as_of):
    ok = 0
    for c in cases:
        out = ask(gen, c.question, as_of)
        if out.kind != "sql":
            continue
        try:
            cur = con.execute(pin_clock(out.sql, as_of))
        except duckdb.Error:  # the baseline's SQL is wrong: a miss (any other error is a bug)
            continue
        rs = ResultSet(columns=[d[0] for d in cur.description], types=[str(d[1]) for d in cur.description],
                       rows=[list(r) for r in cur.fetchmany(1001)])
        ok += any(compare(e, rs, c.order_matters, c.order_keys).facts for e in c.accepted_results())
    return ok / len(cases)


def test_curation_has_a_measurable_effect(catalog, serving_snapshot):
    cases = [c for c in load_golden(location.GOLDEN_DIR).cases if c.answerable]
    con = open_readonly(serving_snapshot.path)
    try:
        curated = _accuracy(BaselineGenerator(catalog, load_glossary(location.GLOSSARY_PATH)), cases, con, catalog.as_of)
        raw = _accuracy(BaselineGenerator(catalog, None), cases, con, catalog.as_of)
    finally:
        con.close()
    assert curated > raw + 0.2, (curated, raw)


def test_concurrent_attempts_do_not_interfere(catalog):
    """The baseline keeps no per-call state: 8 threads give the same SQL as one."""
    from concurrent.futures import ThreadPoolExecutor

    gen = BaselineGenerator(catalog, load_glossary(location.GLOSSARY_PATH))
    qs = [c.question for c in load_golden(location.GOLDEN_DIR).cases] * 4
    serial = [ask(gen, q, catalog.as_of).sql for q in qs]
    with ThreadPoolExecutor(8) as pool:
        parallel = list(pool.map(lambda q: ask(gen, q, catalog.as_of).sql, qs))
    assert parallel == serial


def test_generate_compiles_no_pattern_once_warm(catalog):
    """Patterns are compiled once per vocabulary phrase (cached), never per question: a second
    pass over the golden questions compiles nothing (Python's own ``re`` cache holds only 512)."""
    from sqleval_pipeline.generation import baseline_vocab as vocab

    gen = BaselineGenerator(catalog, load_glossary(location.GLOSSARY_PATH))
    qs = [c.question for c in load_golden(location.GOLDEN_DIR).cases]
    for q in qs:
        ask(gen, q, catalog.as_of)
    caches = (vocab.rx, vocab.phrase_rx, vocab.word_rx)
    before = [c.cache_info().misses for c in caches]
    for q in qs:
        ask(gen, q, catalog.as_of)
    assert [c.cache_info().misses for c in caches] == before
