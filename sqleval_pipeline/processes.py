"""Process-level helpers: whether a process still exists (for what a killed process left
behind: a Dagster run left STARTED, a record writer's staging folder, a command's children),
and the garbage collector's settings of sqleval's own processes."""

from __future__ import annotations

import gc
import os

#: thresholds of Python's cyclic garbage collector in sqleval's processes (Python's own: 700,
#: 10, 10). A sqleval process holds a large heap of long-lived objects (Dagster, pydantic
#: models, sqlglot, the loaded definitions) that every collection of the older generations
#: walks again: with Python's thresholds the collector took 13 % of the test suite's CPU and
#: 17 % of the `sqleval` commands' (perf, 2026-12-05). These collect the young generation
#: every 10,000 net allocations of containers, the middle one every 20 of those and the
#: oldest every 20 of those (and only when it has grown by a quarter, as Python does), so
#: garbage cycles are still freed while the process runs
GC_THRESHOLDS = (10_000, 20, 20)


def tune_gc(*, freeze: bool = False) -> None:
    """Set :data:`GC_THRESHOLDS`; with ``freeze``, also move every object alive now (what the
    imports made: modules, classes, functions, which live as long as the process) out of the
    collector's sight for good (:func:`gc.freeze`), so no later collection walks them.

    >>> tune_gc(); gc.get_threshold() == GC_THRESHOLDS
    True
    """
    gc.set_threshold(*GC_THRESHOLDS)
    if freeze:
        gc.freeze()


def process_alive(pid: int) -> bool:
    """True while process ``pid`` exists (another user's live process included).

    >>> process_alive(os.getpid())
    True
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
