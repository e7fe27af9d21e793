import threading

import pytest

from sqleval_pipeline.demo import location
from sqleval_pipeline.configs import ContextSettings
from sqleval_pipeline.generation.base import GenerationOutput, ProviderError
from sqleval_pipeline.generation.context import ContextBuilder, load_catalog
from sqleval_pipeline.generation.runner import open_batch, run_attempts
from sqleval_pipeline.golden import load_golden
from sqleval_pipeline.pipeline.records import Attempt, load_records
from sqleval_pipeline.pipeline.store import Store


class Crash(BaseException):
    """Simulates the process being killed mid-batch."""


class FakeSystem:
    name = "fake"

    def __init__(self, crash_after=None, errors=None):
        self.calls = 0
        self.crash_after = crash_after
        self.errors = errors or {}
        self._lock = threading.Lock()

    def generate(self, ctx):
        with self._lock:
            self.calls += 1
            n = self.calls
        if self.crash_after is not None and n > self.crash_after:
            raise Crash()
        if ctx.case_id in self.errors:
            raise self.errors[ctx.case_id]
        if "salary" in ctx.question:
            return GenerationOutput(kind="refusal", refusal_reason="hr data is not available")
        return GenerationOutput(kind="sql", sql=f"SELECT 1 AS x -- {ctx.case_id}", model="fake-1")

    def close(self):
        pass


@pytest.fixture(scope="module")
def setup(serving_snapshot):
    cases = load_golden(location.GOLDEN_DIR).cases[:10]
    catalog = load_catalog(serving_snapshot.path, serving_snapshot.manifest.as_of, models_dir=location.DBT_PROJECT_DIR / "models")
    builder = ContextBuilder(catalog, ContextSettings(), None, cases)
    return cases, builder, serving_snapshot.snapshot_id


def batch(store, setup, mode="latest", runs=3):
    cases, _b, sid = setup
    return open_batch(store, partition_key="fake@00000000", config_name="fake",
                      config_version="00000000", snapshot_id=sid, cases=cases, runs=runs, mode=mode)


def run(store, setup, system, info, **kw):
    cases, builder, _ = setup
    return run_attempts(store=store, info=info, cases=cases, generator=system, builder=builder,
                        concurrency=kw.get("concurrency", 4), max_retries=kw.get("max_retries", 2),
                        sleep=kw.get("sleep", lambda s: None))


def test_a_complete_batch_is_reused_without_provider_calls(tmp_path, setup):
    store = Store(tmp_path)
    first = run(store, setup, FakeSystem(), batch(store, setup))
    assert first.provider_calls == 30 and len(first.attempts) == 30
    assert first.batch.status == "complete"
    again = FakeSystem()
    second = run(store, setup, again, batch(store, setup))
    assert again.calls == 0 and second.provider_calls == 0
    assert [a.key for a in second.attempts] == [a.key for a in first.attempts]
    stored = load_records(store.artifact("fake@00000000", first.batch.batch_id, "attempts.parquet"), Attempt)
    assert len(stored) == 30 and stored[0].generator == "fake"


def test_an_interrupted_batch_resumes_without_repeating_finished_attempts(tmp_path, setup):
    store = Store(tmp_path)
    info = batch(store, setup)
    with pytest.raises(Crash):
        run(store, setup, FakeSystem(crash_after=12), info, concurrency=1)
    parts = store.batch_dir(info.partition_key, info.batch_id) / "parts"
    lines = [ln for p in parts.glob("journal-*.jsonl") for ln in p.read_text().splitlines()]
    assert len(lines) == 12  # every finished attempt was journaled before the crash
    resumed_info = batch(store, setup)
    assert resumed_info.batch_id == info.batch_id and resumed_info.status == "running"
    system = FakeSystem()
    result = run(store, setup, system, resumed_info)
    assert result.resumed == 12 and system.calls == 18
    assert len(result.attempts) == 30 and result.batch.status == "complete"


def test_a_new_batch_makes_fresh_attempts(tmp_path, setup):
    store = Store(tmp_path)
    run(store, setup, FakeSystem(), batch(store, setup))
    system = FakeSystem()
    info = batch(store, setup, mode="new")
    res = run(store, setup, system, info)
    assert system.calls == 30 and len(store.batches("fake@00000000")) == 2


def test_provider_failures_become_error_attempts_not_wrong_answers(tmp_path, setup):
    cases = setup[0]
    store = Store(tmp_path)
    waits = []
    errors = {
        cases[0].id: ProviderError("rate_limited", "slow down", retryable=True, retry_after=7),
        cases[1].id: ProviderError("auth_error", "bad key"),
    }
    res = run(store, setup, FakeSystem(errors=errors), batch(store, setup), sleep=waits.append,
              max_retries=2)
    by = {(a.case_id, a.run_index): a for a in res.attempts}
    a0 = by[(cases[0].id, 0)]
    assert a0.kind == "error" and a0.error_code == "rate_limited" and a0.retries == 2
    assert all(w >= 7 for w in waits) and len(waits) == 6  # 3 runs x 2 retries, each >= retry-after
    a1 = by[(cases[1].id, 0)]
    assert a1.kind == "error" and a1.error_code == "auth_error" and a1.retries == 0
    assert res.batch.counts["error"] == 6


def test_refusals_and_sql_are_recorded_with_their_audit_fields(tmp_path, setup):
    store = Store(tmp_path)
    res = run(store, setup, FakeSystem(), batch(store, setup, runs=3))
    a = res.attempts[0]
    assert a.kind == "sql" and a.model == "fake-1" and a.created_at and a.batch_id


def test_batches_sort_by_creation_not_by_their_random_suffix(tmp_path):
    """Two batches made in the same second: the newer one is last, whatever its suffix."""
    import datetime as dt

    from sqleval_pipeline.pipeline.store import BatchInfo, Store, new_batch_id

    store = Store(tmp_path)
    t0 = dt.datetime(2026, 12, 1, 2, 0, 5, 100000, tzinfo=dt.UTC)
    t1 = t0 + dt.timedelta(milliseconds=300)
    common = dict(partition_key="a@1", config_name="a", config_version="1", snapshot_id="s",
                  golden_hash="g", runs=3, case_ids=["q"])
    older = BatchInfo(batch_id="b20261201T020005Z-ffff", created_at=t0.isoformat(), **common)
    newer = BatchInfo(batch_id="b20261201T020005Z-0000", created_at=t1.isoformat(), **common)
    for info in (newer, older):
        store.write_batch(info)
    assert [b.batch_id for b in store.batches("a@1")] == [older.batch_id, newer.batch_id]
    assert store.latest("a@1").batch_id == newer.batch_id
    assert new_batch_id(t0) < new_batch_id(t1)  # new ids carry the millisecond


def _journal_lines(store, info):
    parts = store.batch_dir(info.partition_key, info.batch_id) / "parts"
    return [ln for p in sorted(parts.glob("journal-*.jsonl")) for ln in p.read_text().splitlines()]


def test_a_torn_journal_line_is_redone_and_old_per_attempt_parts_are_read(tmp_path, setup):
    """A crash mid-write leaves half a line: that attempt is made again, the others are kept.
    Journals of earlier versions (one JSON file per attempt) still count as done."""
    cases = setup[0]
    store = Store(tmp_path)
    info = batch(store, setup)
    with pytest.raises(Crash):
        run(store, setup, FakeSystem(crash_after=6), info, concurrency=1)
    parts = store.batch_dir(info.partition_key, info.batch_id) / "parts"
    (journal,) = parts.glob("journal-*.jsonl")
    text = journal.read_text()
    journal.write_text(text[: len(text) - 40])  # the sixth line loses its end
    old = Attempt(config_version="00000000", case_id=cases[9].id, run_index=2, kind="sql",
                  sql="SELECT 42", batch_id=info.batch_id)
    (parts / f"{cases[9].id}__r2.json").write_text(old.model_dump_json())
    system = FakeSystem()
    res = run(store, setup, system, batch(store, setup))
    assert res.resumed == 6 and system.calls == 24  # 5 whole lines + the old part; 30 - 6
    by = {a.key[1:]: a for a in res.attempts}
    assert by[(cases[9].id, 2)].sql == "SELECT 42"
    assert [a.key for a in res.attempts] == [("00000000", c.id, r) for c in cases for r in range(3)]
    assert not parts.exists()  # consolidated: the journal is gone


def test_submission_is_bounded_by_a_window_not_the_whole_batch(setup):
    """At most 4 x concurrency attempts are taken from the work list before one is collected."""
    from sqleval_pipeline.generation.runner import _Counter, _produce

    cases, builder, _ = setup
    pulled = []

    def todo():
        for i in range(200):
            pulled.append(i)
            yield cases[i % len(cases)], i

    kw = dict(config_version="v", batch_id="b", generator=FakeSystem(), builder=builder,
              max_retries=0, calls=_Counter(), sleep=lambda s: None)
    seen = 0
    for _attempt in _produce(todo(), kw, concurrency=3, inline=False):
        seen += 1
        assert len(pulled) - seen <= 4 * 3
    assert seen == 200 and len(pulled) == 200


def test_two_fills_of_one_batch_at_once_make_each_attempt_once(tmp_path, setup):
    """Two runs in "latest" mode pick the same batch: the second waits for the first to fill
    it and finds it complete (no attempt made twice, no duplicate rows)."""
    store = Store(tmp_path)
    info = batch(store, setup)
    store.write_batch(info)
    from tests.conftest import at_once

    systems = [FakeSystem(), FakeSystem()]
    results, errors = at_once(*(lambda s=s: run(store, setup, s, batch(store, setup), concurrency=2)
                                for s in systems))
    assert errors == []
    assert sorted(s.calls for s in systems) == [0, 30]
    assert results[0].batch.batch_id == results[1].batch.batch_id == info.batch_id
    stored = load_records(store.artifact(info.partition_key, info.batch_id, "attempts.parquet"), Attempt)
    assert len({a.key for a in stored}) == len(stored) == 30


def test_a_killed_process_loses_only_the_attempts_in_flight(tmp_path, serving_snapshot):
    """kill -9 in the middle of a batch: every attempt that finished before the kill is in the
    journal (written as it finished), and the resumed batch makes only the rest."""
    import os
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    script = tmp_path / "fill.py"
    script.write_text(textwrap.dedent(f"""
        import datetime, sys, time
        from sqleval_pipeline.configs import ContextSettings
        from sqleval_pipeline.demo import location
        from sqleval_pipeline.generation.base import GenerationOutput
        from sqleval_pipeline.generation.context import ContextBuilder, load_catalog
        from sqleval_pipeline.generation.runner import open_batch, run_attempts
        from sqleval_pipeline.golden import load_golden
        from sqleval_pipeline.pipeline.store import Store

        class Slow:
            name = "slow"
            def generate(self, ctx):
                print(ctx.case_id, ctx.run_index, flush=True)  # answered, about to be journaled
                time.sleep(0.02)
                return GenerationOutput(kind="sql", sql="SELECT 1")
            def close(self): pass

        cases = load_golden(location.GOLDEN_DIR).cases[:10]
        catalog = load_catalog(__import__("pathlib").Path({str(serving_snapshot.path)!r}),
                               datetime.date.fromisoformat("{serving_snapshot.manifest.as_of.isoformat()}"))
        store = Store(__import__("pathlib").Path({str(tmp_path / "store")!r}))
        info = open_batch(store, partition_key="slow@1", config_name="slow", config_version="1",
                          snapshot_id="s", cases=cases, runs=3)
        store.write_batch(info)
        run_attempts(store=store, info=info, cases=cases, generator=Slow(),
                     builder=ContextBuilder(catalog, ContextSettings(), None, cases),
                     concurrency=1, max_retries=0)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    answered = []
    while len(answered) < 15:
        line = proc.stdout.readline()
        assert line, "the filling process ended before 15 answers"
        answered.append(line)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = Store(tmp_path / "store")
    (info,) = store.batches("slow@1")
    assert info.status == "running"
    lines = _journal_lines(store, info)
    # 15 answers were printed; at most the one being answered at the kill is not journaled
    assert 14 <= len(lines) <= 16
    # each record is "<sha256 of its JSON> <JSON>"
    keys = [tuple(__import__("json").loads(ln.split(" ", 1)[1])[k] for k in ("case_id", "run_index"))
            for ln in lines]
    assert len(set(keys)) == len(keys)


def test_an_outage_batch_is_inconclusive_and_running_again_asks_only_its_errors(tmp_path, setup):
    cases = setup[0]
    store = Store(tmp_path)
    down = {c.id: ProviderError("connection_error", "connection refused") for c in cases[:4]}
    outage = run(store, setup, FakeSystem(errors=down), batch(store, setup))
    assert outage.batch.counts["error"] == 12 and outage.batch.inconclusive       # 12 of 30 > 10%
    old_bytes = store.artifact("fake@00000000", outage.batch.batch_id, "attempts.parquet").read_bytes()
    # the provider is back: the same command opens a new batch, asks the 12 ERROR attempts only
    retry_info = batch(store, setup)
    assert retry_info.batch_id != outage.batch.batch_id
    assert retry_info.retries_errors_of == outage.batch.batch_id
    back = FakeSystem()
    retried = run(store, setup, back, retry_info)
    assert back.calls == 12 and retried.provider_calls == 12
    assert retried.batch.counts.get("error", 0) == 0 and not retried.batch.inconclusive
    assert retried.batch.notes["retried_errors"] == {"of": outage.batch.batch_id, "count": 12}
    by_key = {a.key: a for a in outage.attempts}
    for a in retried.attempts:
        if by_key[a.key].kind != "error":      # answers are copied, never asked again
            assert (a.kind, a.sql, a.refusal_reason) == (by_key[a.key].kind, by_key[a.key].sql,
                                                         by_key[a.key].refusal_reason)
        assert a.batch_id == retried.batch.batch_id
    # the old batch is never refilled in place; a third run reuses the good one
    assert store.artifact("fake@00000000", outage.batch.batch_id, "attempts.parquet").read_bytes() == old_bytes
    assert batch(store, setup).batch_id == retried.batch.batch_id


def test_a_few_errors_are_results_not_an_outage(tmp_path, setup):
    store = Store(tmp_path)
    cases = setup[0]
    few = run(store, setup, FakeSystem(errors={cases[0].id: ProviderError("server_error", "boom")}),
              batch(store, setup))
    assert few.batch.counts["error"] == 3 and not few.batch.inconclusive       # 3 of 30 = 10%
    assert batch(store, setup).batch_id == few.batch.batch_id


def test_a_provider_asking_for_an_hour_is_an_error_at_once_and_says_why(tmp_path, setup):
    store = Store(tmp_path)
    cases = setup[0]
    waits = []
    hour = ProviderError("rate_limited", "slow down", retryable=True, retry_after=3600)
    res = run(store, setup, FakeSystem(errors={cases[0].id: hour}), batch(store, setup), sleep=waits.append)
    errors = [a for a in res.attempts if a.kind == "error"]
    assert waits == [] and len(errors) == 3
    assert all("not retried" in a.error_message and "3600 s" in a.error_message for a in errors)


def test_an_edited_journal_record_is_refused_and_made_again(tmp_path, setup):
    store = Store(tmp_path)
    info = batch(store, setup)
    with pytest.raises(Crash):
        run(store, setup, FakeSystem(crash_after=10), info, concurrency=1)
    parts = store.batch_dir(info.partition_key, info.batch_id) / "parts"
    journal = next(parts.glob("journal-*.jsonl"))
    lines = journal.read_bytes().splitlines(keepends=True)
    assert len(lines) == 10 and lines[0][:64].isalnum()
    # another valid JSON record under the old checksum: the answer was changed by hand
    lines[3] = lines[3].replace(b"SELECT 1 AS x", b"SELECT 2 AS x")
    journal.write_bytes(b"".join(lines))
    again = FakeSystem()
    done = run(store, setup, again, info, concurrency=1)
    assert again.calls == 21                      # the 20 never made, and the edited one
    assert not any("SELECT 2" in (a.sql or "") for a in done.attempts)


def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["delete", "flip"])
def test_a_finished_batch_with_damaged_attempts_is_redone_in_a_new_batch(tmp_path, setup, damage):
    store = Store(tmp_path)
    first = run(store, setup, FakeSystem(), batch(store, setup))
    store.publish(first.batch)                    # what every stage does at its end
    path = store.artifact(first.batch.partition_key, first.batch.batch_id, "attempts.parquet")
    path.unlink() if damage == "delete" else _flip(path)
    info = batch(store, setup)
    assert info.batch_id != first.batch.batch_id and info.attempts_from is None
    old = store.get(first.batch.partition_key, first.batch.batch_id)
    assert old.status == "damaged" and old.notes["damaged"][0].startswith("attempts.parquet")
    again = FakeSystem()
    assert run(store, setup, again, info).batch.status == "complete" and again.calls == 30
    with pytest.raises(ValueError, match="damaged"):   # never refilled by name either
        open_batch(store, partition_key=first.batch.partition_key, config_name="fake",
                   config_version="00000000", snapshot_id=setup[2], cases=setup[0], runs=3,
                   batch_id=first.batch.batch_id)


def test_a_damaged_later_file_keeps_the_answers_and_redoes_the_rest(tmp_path, setup):
    store = Store(tmp_path)
    first = run(store, setup, FakeSystem(), batch(store, setup))
    later = store.artifact(first.batch.partition_key, first.batch.batch_id, "executions.parquet")
    later.write_bytes(b"PAR1 stand-in for a stage's output PAR1")
    store.publish(first.batch)
    _flip(later)
    info = batch(store, setup)
    assert info.batch_id != first.batch.batch_id and info.attempts_from == first.batch.batch_id
    again = FakeSystem()
    redone = run(store, setup, again, info)
    assert again.calls == 0 and [a.sql for a in redone.attempts] == [a.sql for a in first.attempts]


def test_provider_calls_are_counted_across_interrupted_processes(tmp_path, setup):
    store = Store(tmp_path)
    info = batch(store, setup)
    with pytest.raises(Crash):
        run(store, setup, FakeSystem(crash_after=12), info, concurrency=1)   # 12 answered, then killed
    second = run(store, setup, FakeSystem(), info, concurrency=1)
    assert second.provider_calls == 18                     # this process's calls
    assert second.batch.provider_calls == 30               # the batch's: every call it cost
