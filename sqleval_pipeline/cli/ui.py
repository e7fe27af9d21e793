"""``sqleval ui``: the Dagster UI on the selected project's own instance.

``dagster dev`` runs as a child in a process group of its own (its webserver, daemon and
code server join that group), with the default dispositions of SIGINT and SIGTERM: a shell
starts background jobs with SIGINT ignored, an ignored signal stays ignored through exec,
and ``dagster dev`` then ignored both signals (it maps SIGTERM onto its SIGINT handler).
SIGINT or SIGTERM sent to ``sqleval ui`` (Ctrl-C, ``kill``, ``make ui`` stopped) is forwarded
to that group; what is still there after :data:`STOP_TIMEOUT_S` seconds is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from sqleval_pipeline.cli.common import console, err, project
from sqleval_pipeline.cli.signals import HANDLED, exit_code
from sqleval_pipeline.warehouse import dbt

#: seconds ``dagster dev`` and its processes get to stop before they are killed
STOP_TIMEOUT_S = 8.0


def _default_signals() -> None:
    """In the child, before exec: SIGINT and SIGTERM back to their default dispositions
    (an inherited "ignore" would survive the exec)."""
    for sig in HANDLED:
        signal.signal(sig, signal.SIG_DFL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_group(proc: subprocess.Popen, sig: int, timeout: float = STOP_TIMEOUT_S) -> bool:
    """Send ``sig`` to the child's process group, wait up to ``timeout`` for every process
    of it to end, then SIGKILL the group. True if it stopped by itself."""
    pgid = proc.pid  # a session leader: its group id is its pid
    _signal_group(pgid, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.poll()  # reap the child itself: a zombie still counts as a member of the group
        if proc.returncode is not None and not _group_alive(pgid):
            return True
        time.sleep(0.1)
    _signal_group(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    return False


def ui(
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port")] = 3000,
) -> None:
    """Open the Dagster UI (`dagster dev`) on the project's instance: the runs the CLI made,
    its assets (asset keys from your dbt project), checks, sensor and nightly schedule.
    Ctrl-C or SIGTERM stops it and every process it started (exit 130 or 143)."""
    # Dagster (~0.7 s to import): loaded by the commands that run assets, not by every command
    from sqleval_pipeline.orchestrate import ensure_dagster_home

    received: list[int] = []
    started = False

    def note(signum, frame) -> None:
        received.append(signum)
        if not started:  # still setting up (dbt parse): stop that right away
            raise KeyboardInterrupt

    # SIGINT/SIGTERM are handled even if this process was started with SIGINT ignored
    previous = {sig: signal.signal(sig, note) for sig in HANDLED}
    try:
        try:
            proj = project()
            dagster_home = ensure_dagster_home(proj.home, proj.spec.orchestration, proj.file)
            dbt.parse(proj)  # the definitions need the manifest; parse once here, not per step
        except KeyboardInterrupt:
            code = exit_code(received[0]) if received else exit_code(signal.SIGINT)
            err.print("interrupted before the Dagster UI started")
            raise typer.Exit(code) from None
        exe = Path(sys.executable).parent / "dagster"
        env = {**os.environ, "DAGSTER_HOME": dagster_home, "SQLEVAL_PROJECT": str(proj.file),
               "PATH": f"{exe.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        workspace = Path(dagster_home) / "workspace.yaml"  # names the code location "sqleval"
        workspace.write_text("load_from:\n  - python_module:\n"
                             "      module_name: sqleval_pipeline.definitions\n"
                             "      attribute: defs\n      location_name: sqleval\n")
        console.print(f"Dagster UI for project {proj.name} on http://{host}:{port} "
                      f"(instance {dagster_home}); Ctrl-C stops it", highlight=False)
        started = True  # from here on a signal is recorded, then forwarded by the loop below
        proc = subprocess.Popen([str(exe), "dev", "-w", str(workspace), "-h", host, "-p", str(port)],
                                env=env, stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_default_signals)
        while proc.poll() is None and not received:
            try:
                proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
        if not received:  # dagster dev ended by itself (a port in use, a failed import …)
            stop_group(proc, signal.SIGTERM, timeout=2)  # whatever it left behind
            if proc.returncode:
                err.print(f"dagster dev exited with code {proc.returncode}")
            raise typer.Exit(proc.returncode or 0)
        sig = received[0]
        err.print(f"{signal.Signals(sig).name}: stopping the Dagster UI (dagster dev and its "
                  "processes) …", highlight=False)
        clean = stop_group(proc, sig)
        err.print("the Dagster UI stopped" if clean else
                  f"the Dagster UI did not stop within {STOP_TIMEOUT_S:.0f} s: its processes were killed",
                  highlight=False)
        raise typer.Exit(exit_code(sig))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
