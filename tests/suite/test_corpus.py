"""The corpus of coincidental and equivalent answers (tests/suite/coincidental.yaml).

A coincidental answer must be right on the pinned snapshot (else it is no coincidence: fix the
corpus), caught by its case's *distilled* suite, and caught by a neighbour of a kind its
counterexample names. An equivalent rewrite must be right on the snapshot and never flagged on
any neighbour of the set.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sqleval_pipeline.demo import location
from sqleval_pipeline.golden import load_golden
from sqleval_pipeline.golden.freeze import run_reference
from sqleval_pipeline.grading import grade_against
from sqleval_pipeline.snapshot import open_readonly
from sqleval_pipeline.suite.check import check_on_suite
from sqleval_pipeline.suite.generate import KINDS

CORPUS = yaml.safe_load((Path(__file__).parent / "coincidental.yaml").read_text(encoding="utf-8"))
COINCIDENTAL = CORPUS["coincidental"]
EQUIVALENT = CORPUS["equivalent"]


def _id(e: dict) -> str:
    return f"{e['case']}:{e['sql'][:40]}"


def test_the_corpus_is_large_enough_and_well_formed():
    assert len(COINCIDENTAL) >= 30 and len(EQUIVALENT) >= 20
    ids = load_golden(location.GOLDEN_DIR).by_id()
    for e in COINCIDENTAL:
        assert e["case"] in ids and e["wrong"].strip() and e["counterexample"].strip(), e
        assert e["kinds"] and set(e["kinds"]) <= set(KINDS), e
    for e in EQUIVALENT:
        assert e["case"] in ids and e["why"].strip(), e
    texts = [" ".join(e["sql"].split()).lower() for e in COINCIDENTAL + EQUIVALENT]
    assert len(texts) == len(set(texts)), "an answer is listed twice"
    for e in COINCIDENTAL + EQUIVALENT:  # never the reference itself
        assert " ".join(e["sql"].split()).lower() != " ".join(ids[e["case"]].reference_sql.split()).lower()


def _on_snapshot(suite_env, e: dict):
    snap = suite_env.snapshot
    con = open_readonly(snap.path)
    try:
        got = run_reference(con, e["sql"], snap.manifest.as_of)
    finally:
        con.close()
    return grade_against(suite_env.cases[e["case"]], got)


@pytest.mark.parametrize("entry", COINCIDENTAL, ids=_id)
def test_a_coincidental_answer_is_right_on_the_snapshot_and_caught_by_its_suite(suite_env, run, entry):
    c = _on_snapshot(suite_env, entry)
    assert c.exact or c.facts, f"not a coincidence: wrong on the pinned snapshot already ({c.mismatch})"
    case = suite_env.cases[entry["case"]]
    hit = suite_env.suite.check(entry["sql"], case, run)
    assert hit is not None, f"{entry['case']}: its distilled suite {suite_env.suite.suite_for(case.id)} misses it"
    assert hit.case_id == case.id and hit.neighbour in suite_env.suite.suite_for(case.id)
    assert hit.reason.startswith(("result_mismatch:", "candidate_failed:"))


@pytest.mark.parametrize("entry", COINCIDENTAL, ids=_id)
def test_the_counterexample_is_a_neighbour_of_the_kind_it_names(suite_env, run, entry):
    case = suite_env.cases[entry["case"]]
    named = [n for n in suite_env.neighbours if n.kind in entry["kinds"]]
    assert named
    assert any(check_on_suite(entry["sql"], case, [n], run, references=suite_env.suite.references) is not None
               for n in named), (
        f"no neighbour of kind {entry['kinds']} shows that {entry['wrong']!r}")


@pytest.mark.parametrize("entry", EQUIVALENT, ids=_id)
def test_an_equivalent_rewrite_is_never_flagged(suite_env, run, entry):
    c = _on_snapshot(suite_env, entry)
    assert c.exact, f"the rewrite is not right on the snapshot: {c.mismatch}"
    case = suite_env.cases[entry["case"]]
    skipped: list = []
    hit = check_on_suite(entry["sql"], case, suite_env.neighbours, run, references=suite_env.suite.references,
                         skipped=skipped)
    assert hit is None, hit.describe()
    assert not skipped, skipped  # it was compared on every neighbour
