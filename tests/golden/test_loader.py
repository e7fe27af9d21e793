import json

import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline.golden import GoldenError, load_golden
from sqleval_pipeline.golden.stats import validate_coverage

GOOD = {
    "id": "t-001", "question": "How many orders?", "reference_sql": "SELECT count(*) FROM fct_orders",
    "difficulty": "simple_aggregate", "band": "answerable", "cluster": "orders", "split": "dev",
    "status": "verified", "provenance": {"source": "test", "author": "me"},
}


def write(tmp_path, lines):
    p = tmp_path / "dom.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_a_valid_file_loads(tmp_path):
    gs = load_golden(write(tmp_path, [json.dumps(GOOD)]))
    assert [c.id for c in gs.cases] == ["t-001"]
    assert gs.locations["t-001"][1] == 1


def test_bad_json_names_file_and_line(tmp_path):
    p = write(tmp_path, [json.dumps(GOOD), '{"id": "t-002", "question": '])
    with pytest.raises(GoldenError) as exc:
        load_golden(p)
    assert f"{p}:2" in str(exc.value) and "not valid JSON" in str(exc.value)


def test_missing_field_names_the_field(tmp_path):
    bad = {k: v for k, v in GOOD.items() if k != "cluster"}
    p = write(tmp_path, [json.dumps(bad)])
    with pytest.raises(GoldenError) as exc:
        load_golden(p)
    assert f"{p}:1 field 'cluster': Field required" in str(exc.value)


def test_duplicate_id_names_both_lines(tmp_path):
    p = write(tmp_path, [json.dumps(GOOD), json.dumps(GOOD)])
    with pytest.raises(GoldenError) as exc:
        load_golden(p)
    msg = str(exc.value)
    assert f"{p}:2 field 'id': duplicate id 't-001' (first defined at {p}:1)" in msg


def test_unknown_band_lists_the_allowed_values(tmp_path):
    p = write(tmp_path, [json.dumps({**GOOD, "band": "easy"})])
    with pytest.raises(GoldenError) as exc:
        load_golden(p)
    msg = str(exc.value)
    assert "field 'band'" in msg and "'answerable', 'needs_definition' or 'should_refuse'" in msg
    assert "(got 'easy')" in msg


def test_should_refuse_with_sql_is_rejected(tmp_path):
    p = write(tmp_path, [json.dumps({**GOOD, "band": "should_refuse"})])
    with pytest.raises(GoldenError, match="should_refuse case has no reference_sql"):
        load_golden(p)


def test_all_problems_are_reported_at_once(tmp_path):
    p = write(tmp_path, ["[1, 2]", json.dumps({**GOOD, "split": "test"}), "not json"])
    with pytest.raises(GoldenError) as exc:
        load_golden(p)
    assert len(exc.value.problems) == 3


def test_the_committed_golden_set_meets_the_spec():
    gs = load_golden(location.GOLDEN_DIR)
    cases = gs.cases
    assert validate_coverage(cases) == []
    verified = [c for c in cases if c.status == "verified"]
    assert len(verified) >= 60
    for d in ("simple_aggregate", "filtered_aggregate", "multi_condition", "time_window", "top_k", "trap"):
        assert sum(c.difficulty == d for c in verified) >= 8, d
    assert sum(c.band == "needs_definition" for c in verified) >= 10
    assert sum(c.band == "should_refuse" for c in verified) >= 8
    assert sum(c.split == "heldout" for c in verified) >= 12
    traps = {t for c in cases for t in c.traps}
    assert {"payment alias", "net vs gross", "completed = delivered", "coded segment",
            "calendar month vs trailing 30 days"} <= traps
    assert any(c.expected and c.expected.alternatives for c in cases)
    for c in cases:
        assert c.cluster
        if c.order_matters:
            assert c.order_keys and "ORDER BY" in c.reference_sql.upper(), c.id
        if c.answerable:
            assert c.expected is not None and c.snapshot_id, f"{c.id} not frozen"
