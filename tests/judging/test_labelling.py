"""`sqleval judge sample | label | calibrate` end to end, the label session in a pseudo-terminal
(as over SSH), including a session killed midway that resumes without losing a label."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from sqleval_pipeline.demo import location
from sqleval_pipeline.cli import app
from tests.conftest import home_over

runner = CliRunner()


@pytest.fixture()
def labelling_project(serving_snapshot, tmp_path, monkeypatch):
    """The demo project with its labels in a temporary folder, evaluated once (baseline-raw)."""
    spec = yaml.safe_load((location.REPO_ROOT / "sqleval.yaml").read_text())
    root = location.REPO_ROOT
    spec["dbt"]["project_dir"] = str(root / spec["dbt"]["project_dir"])
    spec["validation"] = str(root / spec["validation"])
    spec["paths"] = {k: str(root / v) for k, v in spec["paths"].items()}
    spec["paths"]["labels"] = str(tmp_path / "labels")
    spec["paths"]["build"] = str(tmp_path / "home")
    (tmp_path / "labels").mkdir()
    project = tmp_path / "sqleval.yaml"
    project.write_text(yaml.safe_dump(spec))
    home = home_over(serving_snapshot, tmp_path / "home")
    env = {"SQLEVAL_PROJECT": str(project), "SQLEVAL_HOME": str(home),
           "DAGSTER_HOME": str(home / "dagster_home")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    from sqleval_pipeline import project as proj

    proj.select(None)
    result = runner.invoke(app, ["run", "-c", str(root / "evals" / "configs" / "baseline_raw.yaml")])
    assert result.exit_code == 0, result.output
    yield tmp_path, env
    monkeypatch.undo()  # the environment first, then forget the temporary project
    proj.select(None)


def _expect(fd: int, pattern: str, buf: list[str], timeout: float = 60.0) -> str:
    """Read the terminal until ``pattern`` appears in what was printed since the last match."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", "".join(buf))
        if re.search(pattern, text):
            buf.clear()
            return text
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                buf.append(os.read(fd, 65536).decode("utf-8", "replace"))
            except OSError:
                break
    raise AssertionError(f"did not see {pattern!r} in:\n{''.join(buf)[-3000:]}")


def _session(env: dict[str, str]):
    leader, follower = pty.openpty()
    exe = str(Path(sys.executable).parent / "sqleval")
    proc = subprocess.Popen([exe, "judge", "label", "--labeler", "ana"], stdin=follower, stdout=follower,
                            stderr=follower, env={**os.environ, **env, "COLUMNS": "120"},
                            start_new_session=True)
    os.close(follower)
    return proc, leader


def _labels(folder) -> list[dict]:
    f = folder / "labels" / "ana.jsonl"
    return [json.loads(line) for line in f.read_text().splitlines()] if f.exists() else []


@pytest.mark.slow
def test_sample_label_resume_and_calibrate(labelling_project):
    tmp, env = labelling_project
    first = runner.invoke(app, ["judge", "sample", "-n", "3", "--seed", "7"])
    assert first.exit_code == 0, first.output
    queue = [json.loads(line) for line in (tmp / "labels" / "queue" / "sample.jsonl").read_text().splitlines()]
    assert len(queue) == 3
    keys = [(q["config_name"], q["case_id"], q["run_index"]) for q in queue]
    assert len(set(keys)) == 3
    # every queued attempt failed, as the stored grades say
    batch = tmp / "home" / "store" / "runs" / queue[0]["partition_key"] / queue[0]["batch_id"]
    grades = pd.read_parquet(batch / "grades.parquet")
    outcome = {(r.case_id, r.run_index): r.outcome for r in grades.itertuples()}
    assert all(outcome[(q["case_id"], q["run_index"])] in ("WRONG", "DEFERRED_WRONGLY") for q in queue)
    # stratified: as many strata as there are among the failures, up to 3
    diags = pd.read_parquet(batch / "diagnoses.parquet")
    failed_categories = set(diags[diags["judge"] == "rules"]["category"])
    assert len({q["stratum"] for q in queue}) == min(3, len(failed_categories))

    proc, fd = _session(env)
    buf: list[str] = []
    try:
        shown = _expect(fd, r"category \(", buf)
        assert queue[0]["case_id"] in shown and "reference SQL" in shown
        assert "diagnosis" not in shown  # the judges' verdicts are not shown to the labeller
        os.write(fd, b"2\n")
        _expect(fd, r"note", buf)
        os.write(fd, b"summed the wrong column\n")
        _expect(fd, r"category \(", buf)
        os.write(fd, b"s\n")  # skip the second
        _expect(fd, r"category \(", buf)
        os.killpg(proc.pid, signal.SIGKILL)  # the connection drops mid-session
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        os.close(fd)
    (saved,) = _labels(tmp)
    assert (saved["case_id"], saved["run_index"]) == (queue[0]["case_id"], queue[0]["run_index"])
    assert saved["category"] == "wrong_filter" and saved["labeler"] == "ana"  # "2" = the 2nd category
    assert saved["note"] == "summed the wrong column" and saved["batch_id"] == queue[0]["batch_id"]

    proc, fd = _session(env)
    buf = []
    try:
        shown = _expect(fd, r"category \(", buf)
        assert "1 attempt(s) to label" in shown and queue[2]["case_id"] in shown  # resumes at the 3rd
        os.write(fd, b"nonsense\n")
        _expect(fd, r"not a category", buf)
        os.write(fd, b"wrong_grain\n")
        _expect(fd, r"note", buf)
        os.write(fd, b"\n")
        _expect(fd, r"1 labelled, 0 skipped; 0 left", buf)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        os.close(fd)
    labels = _labels(tmp)
    assert [lab["category"] for lab in labels] == ["wrong_filter", "wrong_grain"]
    assert labels[1]["note"] is None

    again = runner.invoke(app, ["judge", "sample", "-n", "100", "--seed", "7"])
    assert again.exit_code == 0, again.output
    queue2 = [json.loads(line) for line in (tmp / "labels" / "queue" / "sample.jsonl").read_text().splitlines()]
    keys2 = [(q["config_name"], q["case_id"], q["run_index"]) for q in queue2]
    assert len(keys2) == len(set(keys2)), "an attempt was drawn twice"

    md = tmp / "calibration.md"
    report = runner.invoke(app, ["judge", "calibrate", "--markdown", str(md)], terminal_width=200)
    assert report.exit_code == 0, report.output
    assert "Judge calibration (2 labelled attempts" in report.output
    text = md.read_text()
    assert "2 labelled attempt(s)" in text and "| rules |" in text and "uncalibrated (n < 20)" in text
