"""SIGTERM and SIGINT stop `sqleval ui` and long `sqleval` commands within seconds, with every
process they started (docs/command-line.md, Signals).

Each command is started in a session of its own, with SIGINT ignored as a script's background
job has it; the signal goes to the `sqleval` process only (never to a group, never by name),
as `kill PID`, `timeout` or a supervisor sends it.
What is left afterwards is read from `/proc`: the command's process group, every process that
descended from it while it ran, and the groups of those.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from sqleval_pipeline.demo import location
from tests.conftest import home_over

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
STOP_WITHIN_S = 10
RESUME_LINE = "interrupted; rerun the same command to resume"  # docs/command-line.md
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}  # 128 + the signal number


# --------------------------------------------------------------------------- /proc


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgid, start time) of a process, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # the command name may hold spaces
    return fields[0], int(fields[1]), int(fields[2]), int(fields[19])  # state ppid pgid start


def _processes() -> dict[int, tuple[str, int, int, int]]:
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                out[int(entry.name)] = st
    return out


def descendants(root: int) -> dict[int, tuple[int, int]]:
    """pid -> (pgid, start time) of every live descendant of ``root``."""
    procs = _processes()
    found, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (_, ppid, pgid, start) in procs.items():
            if ppid == parent and pid not in found:
                found[pid] = (pgid, start)
                frontier.append(pid)
    return found


def _alive(pid: int, start: int) -> bool:
    """The same process (same start time) still exists and is not a zombie."""
    st = _stat(pid)
    return st is not None and st[3] == start and st[0] != "Z"


def _group_members(pgid: int) -> list[int]:
    return [pid for pid, (state, _, g, _) in _processes().items() if g == pgid and state != "Z"]


def _group_exists(pgid: int) -> bool:
    """Signal 0 to the group: it fails only when no process (not even a zombie) is left in
    it. Zombies already handed to init (parent pid 1) are dead and out of sqleval's hands
    (reaping them is init's job, slower on a loaded machine), so a group holding only such
    zombies does not count; a zombie a live process of ours has not reaped does."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    in_group = [st for st in _processes().values() if st[2] == pgid]
    return not in_group or not all(state == "Z" and ppid == 1 for state, ppid, _, _ in in_group)


def leftovers(groups: set[int], known: dict[int, tuple[int, int]]) -> list[str]:
    """What is still there: members of the groups, known descendants (by pid and start
    time), and groups that still exist (see :func:`_group_exists` for zombies)."""
    left = [f"pid {p} of group {g}" for g in sorted(groups) for p in _group_members(g)]
    left += [f"descendant {p}" for p, (_, start) in known.items() if _alive(p, start)]
    left += [f"group {g}" for g in sorted(groups) if _group_exists(g)]
    return sorted(set(left))


def _default_signals() -> None:
    """The test runner may run with SIGINT ignored (a background job): start the command
    with the default dispositions, as a terminal would."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _as_background_job() -> None:
    """The dispositions of `cmd &` in a script (no job control): SIGINT ignored, SIGTERM
    default. The ignore survives exec; `dagster dev` started so ignored SIGINT and SIGTERM."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def start(argv: list[str], env: dict[str, str], logs: Path) -> subprocess.Popen:
    out, err = (logs / "stdout.txt").open("wb"), (logs / "stderr.txt").open("wb")
    try:
        return subprocess.Popen(argv, env=env, cwd=location.REPO_ROOT, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, start_new_session=True,
                                preexec_fn=_as_background_job)
    finally:
        out.close()
        err.close()


def cleanup(groups: set[int]) -> None:
    """After a failed assertion: kill what the test started, by process group id."""
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def stop_and_check(proc: subprocess.Popen, sig: int, logs: Path) -> tuple[float, str]:
    """Send ``sig`` to the process only; within STOP_WITHIN_S it exits with 128 + sig and
    nothing it started is left. Returns (seconds to stop, its stderr)."""
    known = descendants(proc.pid)
    groups = {os.getpgid(proc.pid)} | {g for g, _ in known.values()}
    sent = time.monotonic()
    os.kill(proc.pid, sig)
    try:
        try:
            code = proc.wait(timeout=STOP_WITHIN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{proc.args[1:3]} still running {STOP_WITHIN_S} s after "
                        f"{signal.Signals(sig).name}; stderr:\n{(logs / 'stderr.txt').read_text()[-3000:]}")
        while leftovers(groups, known) and time.monotonic() - sent < STOP_WITHIN_S:
            time.sleep(0.1)
        took = time.monotonic() - sent
        left = leftovers(groups, known)
        stderr = (logs / "stderr.txt").read_text(errors="replace")
        assert not left, f"left running {took:.1f} s after the signal: {left}"
        assert code == EXIT[sig], f"exit code {code}; stderr:\n{stderr[-3000:]}"
        return took, stderr
    finally:
        cleanup(groups)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "COLUMNS")}
    env.update({
        "SQLEVAL_PROJECT": str(location.REPO_ROOT / "sqleval.yaml"),
        "SQLEVAL_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster_home"),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1",
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    })
    return env


# --------------------------------------------------------------------------- sqleval ui


def wait_http(port: int, proc: subprocess.Popen, logs: Path, timeout: float = 120) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"sqleval ui exited with {proc.returncode} before its port answered:\n"
                        f"{(logs / 'stderr.txt').read_text()[-3000:]}")
        try:
            with opener.open(f"http://127.0.0.1:{port}/server_info", timeout=3) as r:
                json.loads(r.read())
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError):
            time.sleep(0.3)
    cleanup({os.getpgid(proc.pid)} | {g for g, _ in descendants(proc.pid).values()})
    pytest.fail(f"the Dagster UI did not answer on port {port} within {timeout:.0f} s")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_ui_stops_with_every_process_it_started(sig, serving_snapshot, tmp_path):
    home, logs = tmp_path / "home", tmp_path / "logs"
    # the session's build under it: the dbt manifest is there (no `dbt parse` before the UI starts)
    home_over(serving_snapshot, home)
    logs.mkdir()
    port = free_port()
    proc = start([str(BIN / "sqleval"), "ui", "--port", str(port)], base_env(home), logs)
    wait_http(port, proc, logs)
    # dagster dev runs in a group of its own, with its webserver (which answered) in it
    kids = descendants(proc.pid)
    assert len({g for g, _ in kids.values()} - {os.getpgid(proc.pid)}) == 1, kids
    assert len(kids) >= 2, f"dagster dev and its webserver should be running: {kids}"
    took, stderr = stop_and_check(proc, sig, logs)
    # stopped by the signal, or (a busy machine, a run the daemon just launched) killed after the
    # grace period; either way every process is gone within the bound stop_and_check asserts
    assert ("the Dagster UI stopped" in stderr
            or "did not stop within 8 s: its processes were killed" in stderr), stderr[-2000:]
    print(f"\n[signals] sqleval ui stopped {took:.1f} s after {signal.Signals(sig).name}")


# --------------------------------------------------------------------------- sqleval run


class SilentServer:
    """A loopback HTTP endpoint that accepts connections and never answers: every provider
    call of the run waits for its timeout (120 s in the configuration below)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.connections:
            c.close()


SILENT_CONFIG = """\
name: silent-provider
description: an OpenAI-compatible server that never answers
generator:
  kind: openai
  model: never-answers
  base_url_env: SQLEVAL_OPENAI_BASE_URL
  api_key_env: OPENAI_API_KEY
  temperature: 0.0
  max_tokens: 64
context:
  prompt_template: evals/prompts/text_to_sql_v1.j2
  curation: true
runs: 3
concurrency: 4
timeout_s: 120
judge: rules
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_run_waiting_for_a_provider_stops_and_keeps_its_batch(sig, serving_snapshot, tmp_path):
    """`sqleval run` whose provider calls hang (worker threads blocked in HTTP reads, which
    Dagster's interruption cannot reach) stops within seconds, says how to resume, and
    leaves its batch in the store to resume from."""
    home, logs, configs = tmp_path / "home", tmp_path / "logs", tmp_path / "configs"
    for d in (logs, configs):
        d.mkdir()
    home_over(serving_snapshot, home)
    (configs / "silent.yaml").write_text(SILENT_CONFIG)
    server = SilentServer()
    env = {**base_env(home), "SQLEVAL_OPENAI_BASE_URL": f"http://127.0.0.1:{server.port}/v1",
           "OPENAI_API_KEY": "test"}
    try:
        proc = start([str(BIN / "sqleval"), "run", "-c", str(configs / "silent.yaml")], env, logs)
        deadline = time.monotonic() + 120
        while not server.connections and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        if not server.connections:
            cleanup({os.getpgid(proc.pid)} if proc.poll() is None else set())
            pytest.fail(f"no provider call reached the server (exit {proc.poll()}):\n"
                        f"{(logs / 'stderr.txt').read_text()[-3000:]}")
        took, stderr = stop_and_check(proc, sig, logs)
    finally:
        server.close()
    assert RESUME_LINE in stderr, stderr[-2000:]
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr[-3000:]
    # the batch is still there, unfinished, to be resumed (the store's layout: store/runs/<key>/<batch>/)
    batches = list((home / "store" / "runs").glob("silent-provider@*/*/batch.json"))
    assert len(batches) == 1, batches
    assert json.loads(batches[0].read_text())["status"] == "running"
    print(f"\n[signals] sqleval run stopped {took:.1f} s after {signal.Signals(sig).name}")


def test_interruptible_block_ends_a_process_whose_threads_hang(tmp_path):
    """The watchdog alone (no Dagster): a main thread that cannot unwind, because the pool
    it leaves joins a worker sleeping for a minute, is ended a few seconds after SIGTERM, with the line."""
    script = tmp_path / "hang.py"
    script.write_text(
        "import sys, time\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from sqleval_pipeline.cli import signals\n"
        "with signals.interruptible():\n"
        "    with ThreadPoolExecutor(1) as pool:\n"
        "        pool.submit(time.sleep, 60)\n"
        "        print('ready', flush=True)\n"
        "        time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_default_signals)
    try:
        assert proc.stdout.readline().strip() == "ready"
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=STOP_WITHIN_S)
        took = time.monotonic() - sent
    finally:
        cleanup({proc.pid})
    assert proc.returncode == 143, err
    assert err.strip() == RESUME_LINE
    assert 3 <= took < STOP_WITHIN_S, took  # it waited for the main thread, then gave up
