"""Record files (sqleval_pipeline.pipeline.recordio): a process converts and reads them in one
in-memory DuckDB of its own, a cursor per call; rows too large for its memory limit get a
database of their own; threads and forked children are kept apart."""

from __future__ import annotations

import os
import signal
import threading
import time

from pydantic import BaseModel

from sqleval_pipeline.pipeline import recordio
from sqleval_pipeline.pipeline.recordio import iter_records, load_records, save_records


class Row(BaseModel):
    k: int
    text: str = ""
    tags: list[str] = []


def test_a_row_of_several_megabytes_round_trips(tmp_path):
    # 6 MB of text: the JSON reader's buffer (4 x the longest row) needs more than the shared
    # database's memory limit, so the conversion gets a database of its own
    big = "é" * (3 << 20)
    assert 192 + 3 * ((4 * len(big.encode()) + 1024) >> 20) > recordio.SCRATCH_MEMORY_MB
    rows = [Row(k=1, text="small"), Row(k=2, text=big, tags=["x"]), Row(k=3)]
    path = save_records(tmp_path / "big.parquet", rows)
    assert load_records(path, Row) == rows


def test_threads_write_and_read_record_files_at_once(tmp_path):
    failures: list[str] = []

    def work(t: int) -> None:
        for round_ in range(4):
            rows = [Row(k=t * 1000 + i, text=f"{t}:{round_}:{i}", tags=[str(i)] * (i % 3)) for i in range(300)]
            path = save_records(tmp_path / f"t{t}-{round_}.parquet", rows)
            if [r.k for r in iter_records(path, Row, chunk=64)] != [r.k for r in rows]:
                failures.append(f"thread {t} round {round_}: keys differ")
            if load_records(path, Row) != rows:
                failures.append(f"thread {t} round {round_}: records differ")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures, failures


def test_a_forked_child_reads_and_writes_in_a_database_of_its_own(tmp_path):
    rows = [Row(k=i, text=str(i)) for i in range(50)]
    parent_file = save_records(tmp_path / "parent.parquet", rows)  # the parent's database exists
    parent_db = recordio._scratch
    pid = os.fork()
    if pid == 0:  # the child: a database of its own, the parent's left alone
        code = 1
        try:
            child_file = save_records(tmp_path / "child.parquet", rows[::-1])
            ok = (load_records(parent_file, Row) == rows and load_records(child_file, Row) == rows[::-1]
                  and recordio._scratch is not parent_db and recordio._scratch[0] == os.getpid())
            code = 0 if ok else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60  # a child stuck (on a lock taken at the fork) fails, never hangs
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise AssertionError("the forked child did not finish within 60 s")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert recordio._scratch is parent_db  # still the parent's, and still working
    assert load_records(tmp_path / "child.parquet", Row) == rows[::-1]
    assert load_records(parent_file, Row) == rows
