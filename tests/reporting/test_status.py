"""One status per configuration (reporting/status.py), on a store written by hand: a failed gate
stays failed whatever runs after it, until that configuration's next version or batch has a
gate of its own; nothing to compare with is "not evaluated", never passed or failed."""

from __future__ import annotations

import datetime as dt

import pytest

from sqleval_pipeline.pipeline.comparisons import COMPARISONS_FILE, Comparison, GateReport
from sqleval_pipeline.pipeline.records import Grade
from sqleval_pipeline.reporting.status import configuration_statuses, status_markdown
from sqleval_pipeline.scoring import build_scorecard
from sqleval_pipeline.pipeline.store import BatchInfo, Store

T0 = dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.timezone.utc)


def _grades(key: str, correct: int, wrong: int) -> list[Grade]:
    """One run per case: ``correct`` CORRECT cases then ``wrong`` WRONG ones."""
    out = []
    for i in range(correct + wrong):
        out.append(Grade(config_version=key, case_id=f"c{i}", run_index=0,
                         outcome="CORRECT" if i < correct else "WRONG",
                         reason="match" if i < correct else "wrong", grader_version="t",
                         band="answerable", difficulty="easy", split="dev", cluster=f"k{i}",
                         snapshot_id="s"))
    return out


def batch(store: Store, key: str, minutes: int, gate: list[str] | None, *, correct=3, wrong=1,
          outage: str | None = None) -> str:
    """A finished batch of ``key`` created ``minutes`` after T0, its scorecard, and (unless
    ``gate`` is None) a gate result with one comparison per status in ``gate``."""
    bid = f"b{minutes:04d}"
    info = BatchInfo(batch_id=bid, partition_key=key, config_name=key.split("@")[0],
                     config_version=key.split("@")[1], snapshot_id="s", golden_hash="g", runs=1,
                     case_ids=[], status="complete", created_at=(T0 + dt.timedelta(minutes=minutes)).isoformat())
    store.write_batch(info)
    card = build_scorecard(_grades(key, correct, wrong), config_version=key, resamples=200)
    store.artifact(key, bid, "scorecard.json").write_text(card.to_json())
    if gate is not None:
        report = GateReport(partition_key=key, batch_id=bid, inconclusive=outage, comparisons=[
            Comparison(kind="baseline", status=s, reason="") for s in gate])
        store.artifact(key, bid, COMPARISONS_FILE).write_text(report.model_dump_json())
    return bid


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "store")


def by_name(statuses):
    return {s.name: s for s in statuses}


def test_a_red_gate_stays_red_when_another_configuration_passes_later(store):
    batch(store, "alpha@00000001", 1, ["failed"], correct=1, wrong=3)
    batch(store, "beta@00000002", 2, ["passed"])   # ran last, passed
    s = by_name(configuration_statuses(store, [("alpha", "alpha@00000001"), ("beta", "beta@00000002")]))
    assert s["alpha"].gate == "failed" and s["beta"].gate == "passed"
    assert s["alpha"].accuracy == pytest.approx(1 / 4) and s["beta"].accuracy == pytest.approx(3 / 4)
    assert s["alpha"].low <= s["alpha"].accuracy <= s["alpha"].high
    # failing first in the list and in the summary
    ordered = configuration_statuses(store, [("beta", "beta@00000002"), ("alpha", "alpha@00000001")])
    assert [x.name for x in ordered] == ["alpha", "beta"]
    assert status_markdown(ordered).startswith("**1 failing** of 2")


def test_the_next_batch_of_the_same_version_that_passes_turns_it_green(store):
    batch(store, "alpha@00000001", 1, ["failed"])
    batch(store, "alpha@00000001", 5, ["passed"])
    (s,) = configuration_statuses(store, [("alpha", "alpha@00000001")])
    assert s.gate == "passed" and s.gated_batch == "b0005"


def test_a_new_version_not_yet_evaluated_keeps_the_red_of_the_one_before(store):
    batch(store, "alpha@00000001", 1, ["failed"])
    (s,) = configuration_statuses(store, [("alpha", "alpha@0000000f")])
    assert s.gate == "failed" and s.gated_version == "alpha@00000001"
    assert "alpha@0000000f has no gate result yet" in s.note
    # ... and the new version's own gate, once it exists, decides
    batch(store, "alpha@0000000f", 9, ["passed"])
    (s,) = configuration_statuses(store, [("alpha", "alpha@0000000f")])
    assert s.gate == "passed" and s.gated_version == "alpha@0000000f"


def test_an_earlier_pass_says_nothing_about_a_new_version(store):
    batch(store, "alpha@00000001", 1, ["passed"])
    (s,) = configuration_statuses(store, [("alpha", "alpha@00000002")])
    assert s.gate == "not evaluated" and s.accuracy is None


def test_nothing_to_compare_with_is_not_evaluated_never_passed_or_failed(store):
    batch(store, "root@00000001", 1, ["skipped", "skipped"])
    (s,) = configuration_statuses(store, [("root", "root@00000001")])
    assert s.gate == "not evaluated" and s.accuracy == pytest.approx(3 / 4)


def test_inconclusive_and_outage(store):
    batch(store, "a@00000001", 1, ["passed", "inconclusive"])
    batch(store, "b@00000001", 2, [], outage="40% of attempts are ERROR")
    s = by_name(configuration_statuses(store, [("a", "a@00000001"), ("b", "b@00000001")]))
    assert s["a"].gate == "inconclusive"
    assert s["b"].gate == "inconclusive"  # an outage is no measurement: it does not pass


def test_a_name_with_no_batch_and_a_damaged_gate_file(store):
    bid = batch(store, "alpha@00000001", 1, ["failed"])
    batch(store, "alpha@00000001", 3, ["passed"])
    store.artifact("alpha@00000001", "b0003", COMPARISONS_FILE).write_text("{not json")
    s = by_name(configuration_statuses(store, [("alpha", "alpha@00000001"), ("new", "new@00000001")]))
    # the damaged newest result is no result: the one before it stands
    assert s["alpha"].gate == "failed" and s["alpha"].gated_batch == bid
    assert s["new"].gate == "not evaluated" and "not evaluated yet" in s["new"].note
