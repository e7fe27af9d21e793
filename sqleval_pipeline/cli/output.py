"""Console output that fits both people and CI logs.

In a terminal, rich renders to the terminal's width as usual. Written to a file or a pipe
(CI, ``| tee``, ``CliRunner``), rich would assume 80 columns and wrap or cut table cells
("…"); :class:`CliConsole` renders each print at the natural width of what it prints
instead (tables unwrapped, lines whole, panels and rules no wider than their content or
80 columns), up to :data:`WIDE`. An explicit ``COLUMNS`` (or ``width=``) still wins.

Python warnings of third-party libraries (matplotlib, Dagster preview/beta, Great
Expectations) raised during a command go to its run log, not to the console:
:func:`warnings_to`.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from rich.console import Console, ConsoleDimensions
from rich.measure import Measurement

#: the widest a print is rendered outside a terminal (a longer line wraps, it is never cut)
WIDE = 10_000
#: rules and full-width panels outside a terminal
NARROW = 80


class CliConsole(Console):
    """A rich Console that never truncates when it does not write to a terminal."""

    def _unbounded(self) -> bool:
        """Not a terminal, and no width given (``width=``, ``COLUMNS``)."""
        if self._width is not None:
            return False
        isatty = getattr(self.file, "isatty", None)
        try:
            return not (isatty is not None and isatty())
        except (OSError, ValueError):
            return True

    @property
    def size(self) -> ConsoleDimensions:
        dims = Console.size.fget(self)  # type: ignore[attr-defined]
        return ConsoleDimensions(WIDE, dims.height) if self._unbounded() else dims

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]

    def print(self, *objects: Any, width: int | None = None, **kwargs: Any) -> None:
        if width is None and objects and self._unbounded():
            width = self._natural_width(objects, kwargs.get("sep", " "), kwargs.get("markup"))
        super().print(*objects, width=width, **kwargs)

    def _natural_width(self, objects: tuple, sep: str, markup: bool | None) -> int | None:
        """The width the objects need unwrapped (at least NARROW, at most WIDE)."""
        options = self.options.update(markup=markup) if markup is not None else self.options
        try:
            if all(isinstance(o, str) for o in objects):
                need = Measurement.get(self, options, sep.join(objects)).maximum
            else:
                need = max(Measurement.get(self, options, o).maximum for o in objects)
        except Exception:  # noqa: BLE001 - not measurable (pretty-printed data): rich decides
            return None
        return min(WIDE, max(NARROW, need))


@contextmanager
def warnings_to(stream: IO[str]) -> Iterator[None]:
    """Within: Python warnings (``warnings.warn``) are written to ``stream`` through the
    ``py.warnings`` logger (``logging.captureWarnings``), not to stderr."""
    logger = logging.getLogger("py.warnings")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    propagate = logger.propagate
    before = warnings.showwarning
    logger.addHandler(handler)
    logger.propagate = False  # a handler on the root logger would print it again
    logging.captureWarnings(True)
    turned_on = warnings.showwarning is not before  # not already captured by someone else
    try:
        yield
    finally:
        if turned_on:
            logging.captureWarnings(False)
        logger.removeHandler(handler)
        logger.propagate = propagate
        try:
            handler.flush()
        except (OSError, ValueError):
            pass
