"""One bad file is one warning: a garbled batch.json of an old batch is skipped (named, with
why) and every other batch of the configuration keeps working."""

from __future__ import annotations

import logging

import pytest

from sqleval_pipeline.pipeline.store import BatchFileError, BatchInfo, Store


def _info(i: int, status: str = "complete") -> BatchInfo:
    return BatchInfo(batch_id=f"2026120{i}T000000-aaaa{i}", partition_key="cfg@v1", config_name="cfg",
                     config_version="v1", snapshot_id="snap-000000000000", golden_hash="g", runs=3,
                     case_ids=["q1"], status=status, created_at=f"2026-12-0{i}T00:00:00+00:00")


@pytest.mark.parametrize("garbage", [b"{not json", b'{"batch_id": 3}', b"", b"\xff\xfe\x00"])
def test_a_garbled_old_batch_is_skipped_with_a_warning_naming_it(tmp_path, caplog, garbage):
    store = Store(tmp_path)
    for i in (1, 2, 3):
        store.write_batch(_info(i))
    bad = store.batch_dir("cfg@v1", _info(1).batch_id) / "batch.json"
    bad.write_bytes(garbage)
    with caplog.at_level(logging.WARNING, logger="sqleval_pipeline.pipeline.store"):
        ids = [b.batch_id for b in store.batches("cfg@v1")]
    assert ids == [_info(2).batch_id, _info(3).batch_id]
    assert store.latest("cfg@v1").batch_id == _info(3).batch_id
    assert list(store.unreadable) == [bad] and str(bad) in store.unreadable[bad]
    assert sum(str(bad) in r.getMessage() for r in caplog.records) == 1
    store.batches("cfg@v1")                                   # asked again: not warned twice
    assert sum(str(bad) in r.getMessage() for r in caplog.records) == 1
    with pytest.raises(BatchFileError) as err:                # asked for by name: a clear error
        store.get("cfg@v1", _info(1).batch_id)
    assert str(bad) in str(err.value) and "delete its folder" in str(err.value)
