"""What a kill -9 leaves behind is cleaned by the next run: a record writer's staging folder."""

from __future__ import annotations

from sqleval_pipeline.recordio import RecordWriter
from sqleval_pipeline.records import Diagnosis


def test_a_killed_writer_s_staging_folder_is_swept_by_the_next_writer(tmp_path):
    import subprocess
    import sys

    target = tmp_path / "executions.parquet"
    script = ("import os, sys\nfrom sqleval_pipeline.records import Diagnosis\n"
              "from sqleval_pipeline.recordio import RecordWriter\n"
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
