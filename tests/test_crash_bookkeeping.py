"""What a kill -9 leaves behind is cleaned by the next run: a record writer's staging folder."""

from __future__ import annotations

import os

from sqleval_pipeline.pipeline.recordio import RecordWriter
from sqleval_pipeline.pipeline.records import Diagnosis


def test_a_killed_writer_s_staging_folder_is_swept_by_the_next_writer(tmp_path):
    import subprocess
    import sys

    target = tmp_path / "executions.parquet"
    script = ("import os, sys\nfrom sqleval_pipeline.pipeline.records import Diagnosis\n"
              "from sqleval_pipeline.pipeline.recordio import RecordWriter\n"
              f"w = RecordWriter({str(target)!r}, Diagnosis)\nos._exit(9)\n")
    subprocess.run([sys.executable, "-c", script], check=False, timeout=120)
    left = [d for d in tmp_path.iterdir() if d.name.startswith(".executions.")]
    assert len(left) == 1                                   # what kill -9 leaves behind
    with RecordWriter(target, Diagnosis) as w:
        mine = [d for d in tmp_path.iterdir() if d.name.startswith(".executions.")]
        assert left[0] not in mine and len(mine) == 1       # swept; this writer's own is kept
        w.write(Diagnosis(config_version="c", case_id="q", run_index=0, category="wrong_filter",
                          explanation="x", judge="rules"))
    assert not [d for d in tmp_path.iterdir() if d.name.startswith(".executions.")]


def test_a_run_left_started_by_a_killed_process_is_marked_failed():
    import socket
    import subprocess
    import sys

    import dagster as dg
    from dagster._core.test_utils import create_run_for_test

    from sqleval_pipeline.orchestrate import HOST_TAG, PID_TAG, fail_orphaned_runs

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()                                            # a process id that no longer exists
    here = socket.gethostname()
    with dg.instance_for_test() as instance:
        killed = create_run_for_test(instance, status=dg.DagsterRunStatus.STARTED,
                                     tags={PID_TAG: str(gone.pid), HOST_TAG: here})
        alive = create_run_for_test(instance, status=dg.DagsterRunStatus.STARTED,
                                    tags={PID_TAG: str(os.getppid()), HOST_TAG: here})
        elsewhere = create_run_for_test(instance, status=dg.DagsterRunStatus.STARTED,
                                        tags={PID_TAG: str(gone.pid), HOST_TAG: "another-host"})
        assert fail_orphaned_runs(instance) == [killed.run_id]
        status = {r: instance.get_run_by_id(r).status for r in (killed.run_id, alive.run_id, elsewhere.run_id)}
        assert status == {killed.run_id: dg.DagsterRunStatus.FAILURE,
                          alive.run_id: dg.DagsterRunStatus.STARTED,
                          elsewhere.run_id: dg.DagsterRunStatus.STARTED}


def test_a_damaged_records_file_is_named_with_its_line_or_row(tmp_path):
    import pytest

    from sqleval_pipeline.pipeline.recordio import RecordsFileError, load_records, save_records

    d = Diagnosis(config_version="c", case_id="q", run_index=0, category="wrong_filter",
                  explanation="x", judge="rules")
    jl = tmp_path / "diagnoses.jsonl"
    save_records(jl, [d, d.model_copy(update={"run_index": 1})])
    lines = jl.read_text().splitlines()
    jl.write_text(lines[0] + "\n" + lines[1].replace('"wrong_filter"', '"no_such_category"') + "\n")
    with pytest.raises(RecordsFileError, match=rf"{jl}:2: not a Diagnosis record"):
        load_records(jl, Diagnosis)
    pq = tmp_path / "diagnoses.parquet"
    save_records(pq, [d] * 50)
    pq.write_bytes(pq.read_bytes()[: pq.stat().st_size // 2])      # cut short (disk full, a crash)
    with pytest.raises(RecordsFileError) as err:
        load_records(pq, Diagnosis)
    assert str(pq) in str(err.value)
