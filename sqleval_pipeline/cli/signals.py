"""SIGTERM and SIGINT for the command line: long commands stop within a few seconds.

``interruptible()`` wraps the in-process Dagster run of a long command (``run_assets``).
Inside it, SIGTERM takes the path of Ctrl-C: both raise KeyboardInterrupt in the main thread.
While a run executes, Dagster installs handlers of its own (``dagster._utils.interrupts``:
SIGTERM is mapped onto its SIGINT handler, which raises ``DagsterExecutionInterruptedError``
inside a step and sets a flag between steps), so the run unwinds as an interrupted run and
``materialize`` returns or raises. Which signal arrived is read from a wakeup fd
(``signal.set_wakeup_fd``: the interpreter writes the number of every signal it handles
there, whichever Python handler is installed), so SIGTERM exits 143 and SIGINT 130.

A main thread cannot always unwind: a step waiting for worker threads blocked in a provider
call (``ThreadPoolExecutor`` joins its workers) keeps waiting for the call's timeout. The
first signal therefore arms a watchdog: after ``GRACE_S`` seconds (or at a second signal)
it prints the same line, terminates this process's child processes and ends the process
with ``os._exit``. Nothing that was written is lost: attempts are journaled one line per
attempt as they finish, and the next run of the same command resumes the batch (the Dagster
run left STARTED is marked failed by ``orchestrate.fail_orphaned_runs``).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqleval_pipeline.processes import process_alive

#: seconds between the first signal and the hard exit when the main thread has not returned
GRACE_S = 4.0
HANDLED = (signal.SIGINT, signal.SIGTERM)
RESUME_LINE = "interrupted; rerun the same command to resume"


def exit_code(signum: int) -> int:
    """The shell's convention: 128 + the signal number (130 SIGINT, 143 SIGTERM)."""
    return 128 + signum


class _State:
    """What the current ``interruptible()`` block has seen (one block at a time)."""

    def __init__(self, read_fd: int, grace: float):
        self.read_fd = read_fd
        # the process's stderr as it is now: while a step runs, Dagster's compute-log capture
        # points file descriptors 1 and 2 at files of its own (dup2)
        try:
            self.stderr_fd = os.dup(2)
        except OSError:
            self.stderr_fd = -1
        self.grace = grace
        self.lock = threading.RLock()  # the main thread's handler may run inside drain()
        self.signals: list[int] = []
        self.finished = False  # the block ended: the watchdog must not fire any more
        self.announced = False  # RESUME_LINE was printed

    def drain(self) -> None:
        """Record the signal numbers waiting in the wakeup pipe (non-blocking)."""
        with self.lock:
            while self.read_fd >= 0:
                try:
                    data = os.read(self.read_fd, 64)
                except (BlockingIOError, OSError):
                    return
                if not data:
                    return
                for b in data:
                    if b in HANDLED:
                        self._record(b)

    def note(self, signum: int) -> None:
        with self.lock:
            self._record(signum)

    def _record(self, signum: int) -> None:
        self.signals.append(signum)
        if len(self.signals) == 1:
            timer = threading.Timer(self.grace, self.expire)
            timer.daemon = True
            timer.start()
        elif not self.finished:  # a second signal: the user insists
            threading.Thread(target=self.expire, daemon=True).start()

    @property
    def first(self) -> int | None:
        return self.signals[0] if self.signals else None

    def announce(self, *, raw: bool = False) -> None:
        """Print :data:`RESUME_LINE` once; ``raw`` (from the watchdog): straight to the
        stderr the block started with, not to ``sys.stderr`` (a progress display may hold it)
        nor to descriptor 2 (a step's log capture may hold it)."""
        if self.announced:
            return
        self.announced = True
        try:
            if raw:
                os.write(self.stderr_fd if self.stderr_fd >= 0 else 2, f"{RESUME_LINE}\n".encode())
            else:
                sys.stderr.write(f"{RESUME_LINE}\n")
                sys.stderr.flush()
        except (OSError, ValueError):
            pass

    def expire(self) -> None:
        """The watchdog: the main thread did not come back in time."""
        if self.finished or self.first is None:
            return
        self.announce(raw=True)
        terminate_children()
        _flush()
        os._exit(exit_code(self.first))


_state: _State | None = None


def _watch(state: _State) -> None:
    """Daemon thread: record signals as soon as the interpreter writes them to the pipe."""
    while not state.finished:
        try:
            ready, _, _ = select.select([state.read_fd], [], [], 0.5)
        except (OSError, ValueError):
            return
        if ready:
            state.drain()


def _quiet_unraisable(previous):
    """A signal handler that raises (ours, Dagster's) may run inside a garbage-collection
    callback, where Python prints "Exception ignored in …" and drops the exception: after a
    signal, drop those silently (the watchdog still ends the process in time)."""

    def hook(unraisable) -> None:
        exc = unraisable.exc_type
        if _state is not None and _state.signals and exc is not None and (
                issubclass(exc, KeyboardInterrupt) or exc.__name__ == "DagsterExecutionInterruptedError"):
            return
        previous(unraisable)

    return hook


def _handler(signum, frame) -> None:
    """Outside Dagster's own handlers: SIGTERM (and SIGINT) raise KeyboardInterrupt."""
    state = _state
    if state is not None:
        state.drain()  # the interpreter wrote the number before calling this handler
        if state.first is None:  # the wakeup fd was taken over by someone else
            state.note(signum)
    raise KeyboardInterrupt


@contextmanager
def interruptible(grace: float = GRACE_S) -> Iterator[_State | None]:
    """Handle SIGTERM/SIGINT as described in the module docstring; yields the state to pass
    to :func:`received` and :func:`finish_interrupted`. None (nothing handled) off the main
    thread, where handlers cannot be installed, or inside another such block."""
    global _state
    if threading.current_thread() is not threading.main_thread() or _state is not None:
        yield None
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    state = _State(read_fd, grace)
    previous = {s: signal.getsignal(s) for s in HANDLED}
    old_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    old_hook = sys.unraisablehook
    sys.unraisablehook = _quiet_unraisable(old_hook)
    _state = state
    watcher = threading.Thread(target=_watch, args=(state,), name="sqleval-signals", daemon=True)
    try:
        for s in HANDLED:
            signal.signal(s, _handler)
        watcher.start()
        yield state
    finally:
        state.drain()
        interrupted = state.first is not None
        if not interrupted:
            state.finished = True
        # after an interruption the watchdog stays armed: the process is ending, and its
        # exit would wait for worker threads that are still blocked
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        signal.set_wakeup_fd(old_fd)
        sys.unraisablehook = old_hook
        _state = None
        if not interrupted:
            os.close(write_fd)
            watcher.join(timeout=1)
            state.read_fd = -1
            os.close(read_fd)
            if state.stderr_fd >= 0:
                os.close(state.stderr_fd)


def received(state: _State | None) -> int | None:
    """The first SIGTERM/SIGINT an ``interruptible()`` block received, or None."""
    if state is None:
        return None
    state.drain()
    return state.first


def finish_interrupted(state: _State) -> int:
    """After an interruption: print the line once, and return the exit code. When threads
    other than the main one are still running (workers blocked in a call), exit right away:
    a normal exit would join them."""
    code = exit_code(state.first or signal.SIGINT)
    with state.lock:
        state.announce()
    if any(t is not threading.main_thread() and t.is_alive() and not t.daemon
           for t in threading.enumerate()):
        terminate_children()
        _flush()
        os._exit(code)
    state.finished = True
    return code


def _flush() -> None:
    """Before ``os._exit``: flush what was printed; show the cursor a progress bar hid."""
    for stream in (sys.__stdout__, sys.__stderr__):  # not a progress display's proxies
        try:
            if stream.isatty():
                stream.write("\x1b[?25h")
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


# ---- child processes ------------------------------------------------------------------------


def children(pid: int | None = None) -> list[int]:
    """Direct children of a process (Linux ``/proc``; empty elsewhere)."""
    pid = pid or os.getpid()
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(p) for p in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return sorted(set(out))


def terminate_children(timeout: float = 1.0) -> None:
    """SIGTERM this process's children (Dagster's log tailers, a dbt or sandbox process),
    then SIGKILL those still there after ``timeout``. multiprocessing's resource tracker is
    left alone: it ignores SIGTERM, and exits (cleaning up) when this process has gone."""
    kids = [p for p in children() if not _is_resource_tracker(p)]
    for pid in kids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while kids and time.monotonic() < deadline:
        kids = [p for p in kids if _alive(p)]
        time.sleep(0.05)
    for pid in kids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _is_resource_tracker(pid: int) -> bool:
    try:
        return b"multiprocessing.resource_tracker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our exited child
    except ChildProcessError:
        pass
    return process_alive(pid)
