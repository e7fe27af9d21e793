"""A process-wide progress sink so long stages can drive the CLI's progress bars.

Stages call ``reporter()(stage, done, total)``; the CLI installs a sink backed by rich. With
no sink installed (the Dagster UI, tests) reports are dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_sink: Callable[[str, int, int], None] | None = None
_lock = threading.Lock()


def set_sink(sink: Callable[[str, int, int], None] | None) -> None:
    global _sink
    with _lock:
        _sink = sink


def reporter() -> Callable[[str, int, int], None] | None:
    sink = _sink
    if sink is None:
        return None

    def report(stage: str, done: int, total: int) -> None:
        with _lock:
            sink(stage, done, total)

    return report
