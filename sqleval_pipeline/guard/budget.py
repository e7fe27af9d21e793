"""Time budget of the statement filter: the parent process never spends long on one text.

The statement filter runs in sqleval's own process, on text nobody reviewed. Its steps are
bounded by construction (the size cap, the structural bounds of :mod:`.bounds` checked on
the token stream before sqlglot parses, literal sizes inspected as text before any
arithmetic), and each step is also *timed*: a :class:`Budget` is checked between steps and
every few hundred nodes inside the tree walks. A statement whose checks exceed it is refused
with its own reason, ``filter_budget_exceeded``, rather than analysed further.

The budget is :data:`FILTER_BUDGET_S` (1 s), never more than the policy's statement timeout:
the parent waits for nothing longer than a statement may run. The guarded executor spends one
budget on everything it does before handing the text to a worker (the filter, the pinned
clock, the filter again on the pinned text).

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
#: the reason code of a statement whose checks exceeded the budget
BUDGET_REASON = "filter_budget_exceeded"


class BudgetExceeded(SqlevalError):
    """Raised by :meth:`Budget.check` once the deadline has passed."""

    def __init__(self, step: str, elapsed_s: float, limit_s: float):
        super().__init__(f"{step}: {elapsed_s:.3f} s of {limit_s:.3f} s")
        self.step = step
        self.elapsed_s = elapsed_s
        self.limit_s = limit_s

    @property
    def message(self) -> str:
        return (f"Checking the statement took longer than the statement filter's time budget "
                f"({self.limit_s:.2f} s, exceeded while {_STEPS.get(self.step, self.step)}); "
                "it is refused rather than analysed further.")

    def as_detail(self) -> dict:
        return {"step": self.step, "elapsed_ms": round(self.elapsed_s * 1000, 1),
                "budget_ms": round(self.limit_s * 1000, 1)}


_STEPS = {
    "characters": "scanning characters", "tokens": "tokenizing", "bounds": "checking sizes",
    "parse": "parsing", "walk": "checking the syntax tree", "tables": "resolving tables",
    "series": "sizing series", "clock": "looking for clock calls", "pin": "pinning the clock",
}


class Budget:
    """A deadline ``limit_s`` seconds after ``start`` (default: now, ``time.perf_counter``)."""

    __slots__ = ("limit_s", "start", "deadline")

    def __init__(self, limit_s: float, start: float | None = None):
        self.limit_s = max(0.0, float(limit_s))
        self.start = time.perf_counter() if start is None else start
        self.deadline = self.start + self.limit_s

    @property
    def expired(self) -> bool:
        return time.perf_counter() > self.deadline

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.perf_counter())

    def check(self, step: str) -> None:
        now = time.perf_counter()
        if now > self.deadline:
            raise BudgetExceeded(step, now - self.start, self.limit_s)


__all__ = ["BUDGET_REASON", "Budget", "BudgetExceeded", "FILTER_BUDGET_S"]
