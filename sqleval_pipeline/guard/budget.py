"""Time budget of the statement filter: the parent process never spends long on one text.

The statement filter runs in sqleval's own process, on text nobody reviewed. Its steps are
bounded by construction (the size cap, the structural bounds of :mod:`.bounds` checked on
the token stream before sqlglot parses, literal sizes inspected as text before any
arithmetic), and each step is also *timed*: a :class:`Budget` is checked between steps and
every few hundred nodes inside the tree walks. A statement whose checks exceed it is refused
with its own reason, ``filter_budget_exceeded``, rather than analysed further.

The budget is :data:`FILTER_BUDGET_S` (1 s), never more than the policy's statement timeout.
It counts the CPU time of the thread doing the checks (``time.thread_time``): the work the text
costs the parent, which does not depend on how busy the machine is, so the same text gets the
same verdict on a laptop and on a saturated CI runner (on the wall clock, a text that takes
2 ms to check was refused on two cores shared by three test workers, because the process
waited its turn for a second; in an evaluation that would have counted a legitimate statement
as refused because of the machine's load). The wall clock still has a ceiling,
:data:`WALL_FACTOR` times the budget, so a starved parent does not wait without end either.
The guarded executor spends one budget on everything it does before handing the text to a
worker (the filter, the pinned clock, the filter again on the pinned text); a budget belongs
to the thread that made it.

>>> b = Budget(10.0)
>>> b.check("parse"); b.expired
False
>>> try:
...     Budget(0.0).check("walk")
... except BudgetExceeded as e:
...     e.step
'walk'
"""

from __future__ import annotations

import time
from sqleval_pipeline.errors import SqlevalError

#: the statement filter's time budget per text (seconds), capped by the statement timeout
FILTER_BUDGET_S = 1.0
#: the wall-clock ceiling, as a multiple of the budget (the budget itself is CPU time)
WALL_FACTOR = 10.0
#: the reason code of a statement whose checks exceeded the budget
BUDGET_REASON = "filter_budget_exceeded"


class BudgetExceeded(SqlevalError):
    """Raised by :meth:`Budget.check` once the budget is spent: ``elapsed_s`` is the CPU time
    spent, ``wall_s`` the wall-clock time (which may be what ran out: :data:`WALL_FACTOR`)."""

    def __init__(self, step: str, elapsed_s: float, limit_s: float, wall_s: float | None = None):
        super().__init__(f"{step}: {elapsed_s:.3f} s of {limit_s:.3f} s")
        self.step = step
        self.elapsed_s = elapsed_s
        self.limit_s = limit_s
        self.wall_s = elapsed_s if wall_s is None else wall_s

    @property
    def on_the_wall_clock(self) -> bool:
        """Whether the wall-clock ceiling ran out, not the CPU budget: a verdict that depends on
        the machine's load, never to be kept for the text."""
        return self.elapsed_s <= self.limit_s

    @property
    def message(self) -> str:
        return (f"Checking the statement took longer than the statement filter's time budget "
                f"({self.limit_s:.2f} s, exceeded while {_STEPS.get(self.step, self.step)}); "
                "it is refused rather than analysed further.")

    def as_detail(self) -> dict:
        return {"step": self.step, "elapsed_ms": round(self.elapsed_s * 1000, 1),
                "wall_ms": round(self.wall_s * 1000, 1), "budget_ms": round(self.limit_s * 1000, 1),
                "ran_out": "wall clock" if self.on_the_wall_clock else "cpu"}


_STEPS = {
    "characters": "scanning characters", "tokens": "tokenizing", "bounds": "checking sizes",
    "parse": "parsing", "walk": "checking the syntax tree", "tables": "resolving tables",
    "series": "sizing series", "clock": "looking for clock calls", "pin": "pinning the clock",
}


class Budget:
    """``limit_s`` seconds of this thread's CPU time from now, and at most :data:`WALL_FACTOR`
    times that on the wall clock from ``start`` (default: now, ``time.perf_counter``)."""

    __slots__ = ("limit_s", "start", "cpu_start", "wall_deadline")

    def __init__(self, limit_s: float, start: float | None = None):
        self.limit_s = max(0.0, float(limit_s))
        self.start = time.perf_counter() if start is None else start
        self.cpu_start = time.thread_time()
        self.wall_deadline = self.start + WALL_FACTOR * self.limit_s

    def spent(self) -> float:
        """CPU seconds this thread has spent since the budget was made."""
        return time.thread_time() - self.cpu_start

    @property
    def expired(self) -> bool:
        return self.spent() > self.limit_s or time.perf_counter() > self.wall_deadline

    def remaining(self) -> float:
        """CPU seconds left (less if the wall-clock ceiling is nearer)."""
        wall_left = (self.wall_deadline - time.perf_counter()) / WALL_FACTOR
        return max(0.0, min(self.limit_s - self.spent(), wall_left))

    def exceeded(self, step: str) -> BudgetExceeded:
        """The exception for ``step`` with the time spent so far."""
        return BudgetExceeded(step, self.spent(), self.limit_s, time.perf_counter() - self.start)

    def check(self, step: str) -> None:
        if self.expired:
            raise self.exceeded(step)


__all__ = ["BUDGET_REASON", "Budget", "BudgetExceeded", "FILTER_BUDGET_S", "WALL_FACTOR"]
