"""Whether a process still exists (for what a killed process left behind: a Dagster run left
STARTED, a record writer's staging folder, a command's children)."""

from __future__ import annotations

import os


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
