"""The guard-v2 hostile cases (``evals/hostile/guard_v2.jsonl``): the file's shape.

The file attacks the differentials the second guard iteration closes (parser / scope
differentials, clock leaks, metadata macros, single-cell exfiltration, memory bombs, serving
file reads, paths in error messages). It is part of the default suite, so every case's
verdict and expected layer are asserted with the rest in ``test_hostile_suite.py``; these
tests prove the file loads, is spread over its classes, instantiates on the demo and is well
formed.
"""

from __future__ import annotations

from collections import Counter

import pytest

from sqleval_pipeline.demo.location import DEMO_SENSITIVE
from sqleval_pipeline.guard.characters import scan
from sqleval_pipeline.guard.executor import NON_PROMPT_LAYERS
from sqleval_pipeline.guard.hostile import (
    HOSTILE_DIR, HostileContext, instantiate, load_templates,
)

V2_FILE = HOSTILE_DIR / "guard_v2.jsonl"
CLASSES = ("parser_differential", "scope_differential", "clock_leak", "metadata_macros",
           "cell_exfiltration", "memory_bombs", "serving_file_reads", "error_path_leaks")


@pytest.fixture(scope="module")
def templates():
    return load_templates([V2_FILE])


@pytest.fixture(scope="module")
def v2_suite(templates, serving_snapshot):
    return instantiate(templates, HostileContext.from_manifest(serving_snapshot.manifest, DEMO_SENSITIVE))


def test_file_loads_with_unique_ids(templates):
    assert len(templates) >= 80
    assert len({t.id for t in templates}) == len(templates)
    assert all(t.kind == "sql" for t in templates)


def test_cases_are_spread_over_the_classes(templates):
    cats = Counter(t.category for t in templates)
    assert set(cats) == set(CLASSES)
    assert len(cats) >= 7
    for cat in CLASSES:
        assert cats[cat] >= 8, (cat, cats[cat])


def test_every_case_names_an_expected_layer_and_a_note(templates):
    for t in templates:
        assert t.expect, t.id
        assert set(t.expect) <= set(NON_PROMPT_LAYERS), t.id
        assert t.note, t.id


def test_ids_do_not_clash_with_the_other_case_files(templates):
    others = [f for f in HOSTILE_DIR.glob("*.jsonl") if f.name != V2_FILE.name]
    assert others
    other_ids = {t.id for t in load_templates(others)}
    assert not other_ids & {t.id for t in templates}


def test_instantiates_on_the_demo(v2_suite, templates, serving_snapshot):
    assert v2_suite.skipped == [] and v2_suite.notes == []
    assert len(v2_suite.cases) == len(templates) >= 80
    for c in v2_suite.cases:
        assert "{" not in c.sql.replace("{'", "").replace("{{", ""), c.id  # every placeholder filled
    by_id = {c.id: c.sql for c in v2_suite.cases}
    assert serving_snapshot.snapshot_id in by_id["serving_file_reads-01"]


def test_parser_differentials_carry_a_suspicious_character_or_a_quoting_trick(v2_suite):
    cases = [c for c in v2_suite.cases if c.category == "parser_differential"]
    with_char = [c for c in cases if scan(c.sql) is not None]
    assert len(with_char) >= 20
    for c in with_char:  # the character is found before any parser runs
        assert scan(c.sql).reason in {"suspicious_character", "control_character"}, c.id


def test_parser_differentials_with_characters_are_refused_by_the_filter(v2_suite, statement_filter):
    for c in v2_suite.cases:
        if c.category == "parser_differential" and scan(c.sql) is not None:
            v = statement_filter.check(c.sql)
            assert not v.allowed and v.reason in {"suspicious_character", "control_character"}, c.id
