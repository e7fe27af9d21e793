"""Read the project's text files with errors that name ``file:line``: JSON Lines and YAML.

Two helpers, one per format, shared by every loader (golden cases, recorded answers, human
labels, hostile case templates, configurations, the project file, the glossary):

- :func:`json_lines` yields ``(line number, line text, object)`` for each non-blank line of
  a JSON Lines file and hands every bad line (not JSON, or JSON but not an object) to the
  caller's ``on_bad`` callback as a :class:`BadJsonLine` — a callback that raises stops at
  the first bad line, one that appends collects them all;
- :func:`parse_yaml` parses a YAML document into a :class:`YamlDocument`: the data (exactly
  what :func:`yaml.safe_load` returns) plus :meth:`YamlDocument.line_of`, the line of a
  field path (a pydantic error's ``loc``), and :meth:`YamlDocument.field_error`, the
  ``file:line: field 'a.b': message`` text of one error.

>>> bad = []
>>> [(n, d) for n, _, d in json_lines("f.jsonl", '{"a": 1}\\n\\n[2]\\n{oops\\n', bad.append)]
[(1, {'a': 1})]
>>> [(b.where, b.reason) for b in bad]
[('f.jsonl:3', 'expected a JSON object, got a list'), ('f.jsonl:4', 'Expecting property name enclosed in double quotes at column 2')]
>>> doc = parse_yaml("c.yaml", "name: x\\ngenerator:\\n  kind: baseline\\n  modle: m\\n", ValueError)
>>> doc.data["generator"]["kind"], doc.line_of(("generator", "modle")), doc.line_of(("runs",))
('baseline', 4, None)
>>> doc.field_error(("generator", "modle"), "Extra inputs are not permitted")
"c.yaml:4: field 'generator.modle': Extra inputs are not permitted"
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# --------------------------------------------------------------------------- JSON Lines


@dataclass(frozen=True)
class BadJsonLine:
    """One bad line of a JSON Lines file: ``error`` is the JSON error, or None when the line
    is valid JSON but not an object (``value`` is then what it parsed to)."""

    path: Path | str
    line: int
    text: str
    error: ValueError | None
    value: Any = None

    @property
    def where(self) -> str:
        """``file:line``."""
        return f"{self.path}:{self.line}"

    @property
    def reason(self) -> str:
        """What is wrong, briefly: ``<JSON error> at column N`` or ``expected a JSON object``."""
        if self.error is None:
            return f"expected a JSON object, got a {type(self.value).__name__}"
        if isinstance(self.error, json.JSONDecodeError):
            return f"{self.error.msg} at column {self.error.colno}"
        return str(self.error)


def json_lines(path: Path | str, text: str,
               on_bad: Callable[[BadJsonLine], None]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """``(line number, line text, object)`` for each non-blank line of ``text`` (the content
    of ``path``; lines count from 1). A line that is not JSON, or not a JSON object, goes to
    ``on_bad`` instead and is skipped (unless ``on_bad`` raises).

    Lines end at ``\\n`` only (``\\r\\n`` tolerated), as JSON Lines says: a U+2028, U+0085
    or form feed written raw inside a JSON string is part of its line, not a line break.

    >>> list(json_lines("f", '{"a": 1}\\n', print))
    [(1, '{"a": 1}', {'a': 1})]
    >>> [d for _, _, d in json_lines("f", '{"q": "a' + chr(0x2028) + 'b"}\\r\\n', print)] == [{"q": "a" + chr(0x2028) + "b"}]
    True
    """
    for lineno, raw in enumerate(text.split("\n"), start=1):
        raw = raw[:-1] if raw.endswith("\r") else raw
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except ValueError as exc:  # JSONDecodeError, or e.g. an integer too long to convert
            on_bad(BadJsonLine(path, lineno, raw, exc))
            continue
        if not isinstance(data, dict):
            on_bad(BadJsonLine(path, lineno, raw, None, data))
            continue
        yield lineno, raw, data


# --------------------------------------------------------------------------- YAML


@dataclass
class YamlDocument:
    """A parsed YAML file: its ``data`` and the line of every mapping key and sequence item."""

    path: Path | str
    data: Any
    node: yaml.Node | None = field(repr=False, default=None)

    def line_of(self, loc: Sequence[Any]) -> int | None:
        """The line (from 1) of the field at ``loc`` (keys and list indexes, e.g. a pydantic
        error's ``loc``); when the field is absent, the line of its deepest present parent
        field; None when not even the first key is in the file."""
        node, line = self.node, None
        for key in loc:
            child = None
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:  # the last duplicate wins, as in the loaded data
                    if isinstance(k, yaml.ScalarNode) and k.value == str(key):
                        child, line_here = v, k.start_mark.line + 1
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) \
                    and 0 <= key < len(node.value):
                child = node.value[key]
                line_here = child.start_mark.line + 1
            if child is None:
                break
            node, line = child, line_here
        return line

    def where(self, loc: Sequence[Any], default_line: int | None = None) -> str:
        """``file:line`` of the field at ``loc`` (see :meth:`line_of`), or ``file``."""
        line = self.line_of(loc) or default_line
        return f"{self.path}:{line}" if line else str(self.path)

    def field_error(self, loc: Sequence[Any], message: str, *, field: str | None = None,
                    default_line: int | None = None) -> str:
        """``file:line: field 'a.b': message``; ``field`` defaults to ``loc`` joined by dots."""
        name = field if field is not None else ".".join(str(x) for x in loc)
        return f"{self.where(loc, default_line)}: field '{name}': {message}"


def parse_yaml(path: Path | str, text: str, error: type[Exception]) -> YamlDocument:
    """Parse ``text`` (the content of ``path``) like :func:`yaml.safe_load`, keeping the
    nodes for :meth:`YamlDocument.line_of`. Invalid YAML raises ``error`` with the message
    ``<path>: not valid YAML: <the parser's error>``.

    >>> parse_yaml("x.yaml", "a: [1", ValueError)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: x.yaml: not valid YAML: while parsing a flow sequence...
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {exc}") from exc
    finally:
        loader.dispose()
    return YamlDocument(path, data, node)


# --------------------------------------------------------------------------- any code point

#: how every writer of text encodes what cannot be UTF-8 (a lone surrogate): as the visible,
#: JSON-compatible escape ``\\udXXX`` instead of crashing
ENCODING_ERRORS = "backslashreplace"


def encodable(text: str) -> str:
    """``text`` unchanged when it is valid Unicode for UTF-8, else with each lone surrogate
    written as its escape (``\\ud800``): untrusted text (a system's SQL, a provider's reply,
    a DuckDB message quoting it) can hold any code point, and no writer may crash on one.

    >>> encodable("abc é"), encodable("a" + chr(0xD800) + "b")
    ('abc é', 'a\\\\ud800b')
    >>> encodable("nul" + chr(0) + " and rtl" + chr(0x202E)) == "nul" + chr(0) + " and rtl" + chr(0x202E)
    True
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", ENCODING_ERRORS).decode("utf-8")


#: code points a report must never carry raw: C0/C1 controls (tab, newline and carriage return
#: excepted), DEL, zero-width and bidirectional formatting characters, the BOM and lone
#: surrogates — shown instead as their ``\\uXXXX`` escape
_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e"
                        "\u2060-\u2069\ufeff\ud800-\udfff]")


def visible(text: str) -> str:
    r"""``text`` for a report (HTML, Markdown): every control, invisible formatting character
    or lone surrogate written as its escape, so a NUL or a right-to-left override in a
    system's SQL shows as ``\u0000`` / ``\u202e`` instead of reaching the page raw.

    >>> print(visible("a" + chr(0) + "b " + chr(0x202E) + "c\nd"))
    a\u0000b \u202ec
    d
    >>> visible("été, 東京")
    'été, 東京'
    """
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def visible_text(render: Callable[..., str]) -> Callable[..., str]:
    """Decorate a renderer of a Markdown or text report: its output goes through :func:`visible`."""
    @functools.wraps(render)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        return visible(render(*args, **kwargs))
    return wrapper


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary file of its own beside ``path`` (unique per call, so two threads or two
    processes writing the same file never share one), renamed over ``path`` when the block
    ends without error and removed when it fails: for writers that need a file name (Parquet,
    copies, downloads). A reader sees the old file or the new one, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomically(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` in one rename (temporary file in the same folder, flushed
    and fsynced first): a reader, or a process killed at any moment, sees the old file or the
    new one, never a mix. The file keeps its permissions (0644 when new)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8", ENCODING_ERRORS) if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
