"""Drive a command line program through a pseudo-terminal (stdlib ``pty``): what a person at a
terminal (or over SSH) sees and types, prompts and all."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][AB0-2]|\r")


def _controlling_terminal() -> None:
    """In the child, after ``setsid``: make the pty (its stdin) the controlling terminal, so
    Ctrl-C typed there is SIGINT, as in a real terminal; and give the program the signal
    dispositions a shell gives a foreground job. The test runner may itself run with SIGINT and
    SIGQUIT ignored (started as ``cmd &`` from a script, without job control), and an ignored
    signal stays ignored across exec: Ctrl-C would then be echoed and do nothing."""
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """``argv`` running with a pty as its stdin, stdout and stderr."""

    def __init__(self, argv: list[str], *, env: dict[str, str], cwd: str, columns: int = 200):
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                                     env={**env, "COLUMNS": str(columns), "LINES": "50"},
                                     start_new_session=True, close_fds=True,
                                     preexec_fn=_controlling_terminal)
        os.close(slave)
        self.fd = master
        self.screen = ""   # everything shown so far (ANSI codes stripped)
        self._pos = 0      # where the next expect() starts looking

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the program closed the terminal
            return False
        if not data:
            return False
        self.screen += _ANSI.sub("", data.decode("utf-8", "replace"))
        return True

    def expect(self, pattern: str, timeout: float = 90) -> re.Match:
        """Wait until ``pattern`` (a regex) shows after the previous match; return the match."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.screen, self._pos)
            if m:
                self._pos = m.end()
                return m
            left = deadline - time.monotonic()
            if left <= 0 or (not self._read(min(left, 0.5)) and self.proc.poll() is not None
                             and not self._read(0.1)):
                raise AssertionError(f"{pattern!r} never showed; the screen ends with:\n"
                                     f"{self.screen[-3000:]}")

    def send(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())

    def kill(self, sig: int = signal.SIGKILL) -> int:
        os.killpg(self.proc.pid, sig)
        return self.wait()

    def wait(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.2)
        while self._read(0.1):
            pass
        code = self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        os.close(self.fd)
        return code
