import json
import shutil

import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline.golden import load_golden
from sqleval_pipeline.golden.growth import GrowthError, add_case


@pytest.fixture()
def golden_file(tmp_path):
    p = tmp_path / "commerce.jsonl"
    shutil.copy(location.GOLDEN_DIR / "commerce.jsonl", p)
    return p


def add(golden_file, serving_snapshot, **kw):
    return add_case(golden_file, serving=serving_snapshot.path, snapshot_id=serving_snapshot.snapshot_id,
                    as_of=serving_snapshot.manifest.as_of, **kw)


def test_a_wrong_answer_report_becomes_a_frozen_case(golden_file, serving_snapshot):
    before = len(load_golden(golden_file))
    case = add(golden_file, serving_snapshot,
               question="How many wallet orders were returned?",
               sql="SELECT count(*) AS orders FROM fct_orders WHERE payment_method = 'wallet' AND status = 'returned'",
               difficulty="filtered_aggregate", band="answerable", cluster="orders",
               author="analyst", reviewer="lead")
    gs = load_golden(golden_file)
    assert len(gs) == before + 1
    # the next id after the file's highest (whatever the file holds), in its own prefix
    highest = max(int(c.id.rsplit("-", 1)[1]) for c in load_golden(golden_file).cases if c.id != case.id)
    assert case.id == f"com-{highest + 1:03d}" and case.status == "verified"
    assert case.expected.types == ["BIGINT"] and case.expected.rows[0][0] > 0
    assert gs.by_id()[case.id].snapshot_id == serving_snapshot.snapshot_id


def test_without_sql_or_reviewer_the_case_is_unverified(golden_file, serving_snapshot):
    case = add(golden_file, serving_snapshot, question="Which city grew fastest?", sql=None,
               difficulty="top_k", band="answerable", cluster="customers")
    assert case.status == "unverified" and case.expected is None


def test_sql_that_the_snapshot_cannot_serve_is_refused_and_nothing_is_written(golden_file, serving_snapshot):
    text = golden_file.read_text()
    with pytest.raises(GrowthError, match="qualifier_not_allowed|table_not_allowed"):
        add(golden_file, serving_snapshot, question="Average salary?",
            sql="SELECT avg(annual_ctc_inr) FROM hr.salaries", difficulty="simple_aggregate",
            band="answerable", cluster="x", reviewer="lead")
    assert golden_file.read_text() == text


def test_duplicate_ids_are_refused(golden_file, serving_snapshot):
    with pytest.raises(GrowthError, match="already exists"):
        add(golden_file, serving_snapshot, question="How many orders?", sql="SELECT count(*) FROM fct_orders",
            difficulty="simple_aggregate", band="answerable", cluster="orders", case_id="com-001")


def test_a_golden_file_changed_meanwhile_is_not_overwritten(tmp_path):
    import threading

    from sqleval_pipeline.golden.loader import GoldenChanged, golden_file_lock, write_cases

    f = tmp_path / "g.jsonl"
    f.write_text("")
    before = f.read_bytes()
    f.write_text("{}\n")                       # another writer got there first
    with pytest.raises(GoldenChanged, match="changed on disk"):
        write_cases(f, [], before=before)
    assert f.read_text() == "{}\n"
    # the lock is held while a writer checks and replaces: a second writer waits
    order = []
    with golden_file_lock(f):
        t = threading.Thread(target=lambda: (write_cases(f, []), order.append("second")))
        t.start()
        t.join(0.3)
        order.append("first")
    t.join(5)
    assert order == ["first", "second"]


def test_appending_keeps_the_text_read_and_refuses_a_file_changed_meanwhile(golden_file):
    """Imports and proposals append through one writer: what was read stays byte for byte
    (blank lines, a line spaced its own way, a last line without its newline) and the new
    cases follow; when the
    file changed since it was read, nothing is written (the proposer's route included)."""
    from sqleval_pipeline.golden.loader import GoldenChanged, append_cases
    from sqleval_pipeline.golden.propose import append_proposals

    cases = list(load_golden(golden_file).cases)
    a, b = (c.model_copy(update={"id": f"{c.id}-copy"}) for c in cases[:2])
    text = golden_file.read_text(encoding="utf-8")
    first, rest = text.split("\n", 1)
    spaced = json.dumps(json.loads(first), indent=None, separators=(" , ", " : "))
    head = f"\n{spaced}\n\n{rest.rstrip(chr(10))}"  # no newline at its end
    golden_file.write_text(head, encoding="utf-8")
    append_cases(golden_file, [a, b], before=head.encode("utf-8"))
    after = golden_file.read_text(encoding="utf-8")
    lines = after.splitlines()
    assert after.startswith(head + "\n") and lines[-2:] == [a.to_json_line(), b.to_json_line()]
    assert [c.id for c in load_golden(golden_file).cases] == [*(c.id for c in cases), a.id, b.id]
    for append in (lambda: append_cases(golden_file, [a], before=head.encode("utf-8")),
                   lambda: append_proposals(golden_file, head.encode("utf-8"), [a])):
        with pytest.raises(GoldenChanged, match="changed on disk"):
            append()
        assert golden_file.read_text(encoding="utf-8") == after
    new = golden_file.parent / "new.jsonl"  # a file that did not exist: before is None
    append_cases(new, [a], before=None)
    assert new.read_text(encoding="utf-8") == a.to_json_line() + "\n"
    with pytest.raises(GoldenChanged):
        append_cases(new, [b], before=None)
