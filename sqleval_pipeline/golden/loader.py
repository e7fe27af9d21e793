"""Load golden-set JSON Lines files with errors that name the file, the line and the field."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from sqleval_pipeline.golden.model import Case
from sqleval_pipeline.textfiles import BadJsonLine, json_lines, write_atomically
from sqleval_pipeline.errors import SqlevalError


@dataclass
class Problem:
    path: Path
    line: int
    field: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}"
        if self.field:
            where += f" field '{self.field}'"
        return f"{where}: {self.message}"


class GoldenError(SqlevalError, ValueError):
    """The golden set cannot be loaded; every problem names file, line and field."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        head = f"{len(problems)} problem(s) in the golden set:\n  "
        super().__init__(head + "\n  ".join(str(p) for p in problems))


@dataclass
class GoldenSet:
    cases: list[Case]
    #: case id -> (file, line)
    locations: dict[str, tuple[Path, int]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cases)

    def by_id(self) -> dict[str, Case]:
        return {c.id: c for c in self.cases}

    def domains(self) -> list[str]:
        return sorted({p.stem for p, _ in self.locations.values()})


_HINTS = {
    "literal_error": "use one of the allowed values",
    "missing": "add the field",
    "extra_forbidden": "remove it or fix its spelling",
    "string_pattern_mismatch": "ids are lower-case letters, digits, '_', '-', '.'",
}


def _from_validation(path: Path, line: int, exc: ValidationError) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or None
        msg = err["msg"]
        hint = _HINTS.get(err["type"])
        if err["type"] != "missing" and "input" in err and not isinstance(err["input"], dict):
            msg += f" (got {err['input']!r})"
        if hint:
            msg += f" — {hint}"
        problems.append(Problem(path, line, loc, msg))
    return problems


def parse_lines(path: Path, text: str) -> tuple[list[tuple[int, Case]], list[Problem]]:
    cases: list[tuple[int, Case]] = []
    problems: list[Problem] = []

    def bad(b: BadJsonLine) -> None:
        problems.append(Problem(path, b.line, None, "each line must be a JSON object" if b.error is None
                                else f"not valid JSON ({b.reason}); each line must be one JSON object"))

    for lineno, _raw, data in json_lines(path, text, bad):
        try:
            cases.append((lineno, Case.model_validate(data)))
        except ValidationError as exc:
            problems.extend(_from_validation(path, lineno, exc))
    return cases, problems


def golden_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(root.glob("*.jsonl"))  # an empty folder is an empty golden set


def load_golden(*paths: Path, difficulties: tuple[str, ...] | None = None,
                clusters: tuple[str, ...] | None = None) -> GoldenSet:
    """Load and validate golden files (or directories of ``*.jsonl``); raise on any problem.
    ``difficulties`` and ``clusters`` are the project's taxonomy (None: any cluster): a case
    outside it is a problem."""
    files: list[Path] = []
    for p in paths:
        if not p.exists():
            raise GoldenError([Problem(p, 0, None, "file or directory does not exist")])
        files.extend(golden_files(p))
    all_cases: list[Case] = []
    locations: dict[str, tuple[Path, int]] = {}
    problems: list[Problem] = []
    for f in files:
        cases, probs = parse_lines(f, f.read_text(encoding="utf-8"))
        problems.extend(probs)
        for lineno, case in cases:
            if case.id in locations:
                first = locations[case.id]
                problems.append(
                    Problem(f, lineno, "id", f"duplicate id '{case.id}' (first defined at "
                            f"{first[0]}:{first[1]}); ids must be unique and stable")
                )
                continue
            if difficulties is not None and case.difficulty not in difficulties:
                problems.append(Problem(f, lineno, "difficulty", f"'{case.difficulty}' is not in "
                                        f"the project's taxonomy {list(difficulties)} — use one "
                                        "of them, or declare it under taxonomy.difficulties"))
                continue
            if clusters is not None and case.cluster not in clusters:
                problems.append(Problem(f, lineno, "cluster", f"'{case.cluster}' is not in the "
                                        f"project's clusters {list(clusters)} — use one of them, "
                                        "or declare it under taxonomy.clusters"))
                continue
            locations[case.id] = (f, lineno)
            all_cases.append(case)
    if problems:
        raise GoldenError(problems)
    return GoldenSet(all_cases, locations)


class GoldenChanged(SqlevalError, ValueError):
    """A golden file changed on disk between being read and being rewritten."""


@contextmanager
def golden_file_lock(path: Path) -> Iterator[None]:
    """Hold the lock of the golden files of ``path``'s folder (an ``flock`` on the folder
    itself: no lock file is added to the user's repository). Every writer of a golden file
    holds it while it checks the file is unchanged and replaces it, so two writers at once
    never lose each other's cases."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


_UNREAD = object()


def write_cases(path: Path, cases: list[Case], *, before: bytes | None | object = _UNREAD) -> None:
    """Rewrite a golden file atomically, one case per line, in the given order. With
    ``before`` (the bytes the caller read, None for a file that did not exist), the file must
    still hold them: else :class:`GoldenChanged` and nothing is written."""
    text = "".join(c.to_json_line() + "\n" for c in cases)
    with golden_file_lock(path):
        if before is not _UNREAD:
            _unchanged_since(path, before)  # type: ignore[arg-type]
        write_atomically(path, text)


def append_cases(path: Path, cases: Sequence[Case], *, before: bytes | None) -> None:
    """Add ``cases`` at the end of a golden file in one atomic rewrite (imports, proposals):
    the text the caller read (``before``; None for a file that did not exist) is kept byte
    for byte, its blank lines and spacing included. When the file no longer holds it,
    :class:`GoldenChanged` and nothing is written."""
    with golden_file_lock(path):
        _unchanged_since(path, before)
        head = before or b""
        if head and not head.endswith(b"\n"):
            head += b"\n"
        body = "".join(c.to_json_line() + "\n" for c in cases).encode("utf-8")
        write_atomically(path, head + body)  # keeps the file's permissions (0644 when new)


def _unchanged_since(path: Path, before: bytes | None) -> None:
    """Raise :class:`GoldenChanged` unless ``path`` holds ``before`` (None: does not exist);
    called under :func:`golden_file_lock`, so the check and the write are one step."""
    current = path.read_bytes() if path.exists() else None
    if current != before:
        raise GoldenChanged(f"{path} changed on disk while this command ran; nothing was "
                            "written — run it again")
