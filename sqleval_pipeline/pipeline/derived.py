"""Derived files of a batch reused when their inputs are unchanged (content-addressed).

A stage that derives a file from others (the scorecard from the grades, the gate from the
scorecards it compares, the HTML page from all of them) names its inputs — files, values and
the code that computes it — as one digest (:func:`inputs_digest`). After writing the file it
records, in the batch's ``derived.json``, that digest and the SHA-256 of what it wrote
(:func:`record`). A later run with the same digest reuses the file (:func:`reusable`) when it
is still the one written: a file edited or damaged since is computed again, never reused.

>>> import tempfile; folder = Path(tempfile.mkdtemp())
>>> (folder / "out.json").write_text("{}")
2
>>> key = inputs_digest("rule-1", {"a": 1})
>>> record(folder, "out.json", key); reusable(folder, "out.json", key) == folder / "out.json"
True
>>> reusable(folder, "out.json", inputs_digest("rule-2", {"a": 1})) is None   # another input
True
>>> _ = (folder / "out.json").write_text('{"edited": true}'); reusable(folder, "out.json", key) is None
True
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any
import importlib.util

from sqleval_pipeline.pipeline import batch_files as bf
from sqleval_pipeline.textfiles import file_sha256, write_atomically

DERIVED_FILE = bf.DERIVED
_SOURCE_SUFFIXES = (".py", ".html", ".j2", ".jinja", ".css", ".js")


def inputs_digest(*parts: Any) -> str:
    """One digest of ``parts``: a :class:`~pathlib.Path` counts by its bytes (or as missing),
    anything else by its JSON text (``str()`` for what JSON cannot hold)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, Path):
            h.update(f"\0file:{part.name}:".encode())
            h.update(file_sha256(part).encode() if part.is_file() else b"missing")
        else:
            h.update(b"\0value:")
            h.update(json.dumps(part, sort_keys=True, default=str).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def stat_fingerprint(paths: list[Path]) -> list[tuple[str, int, int] | tuple[str, None, None]]:
    """Size and modification time of many files (a store-wide input, cheaper than their bytes)."""
    out: list = []
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            out.append((str(p), None, None))
            continue
        out.append((str(p), st.st_size, st.st_mtime_ns))
    return out


@lru_cache(maxsize=None)
def code_digest(*packages: str) -> str:
    """Digest of the source files of the named modules or packages (the code that derives a
    file is one of its inputs), once per process."""
    h = hashlib.sha256()
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            h.update(f"\0{name}:unknown".encode())
            continue
        origin = Path(spec.origin)
        files = [origin] if spec.submodule_search_locations is None else sorted(
            Path(root) / f for loc in spec.submodule_search_locations for root, _d, fs in os.walk(loc)
            for f in fs if f.endswith(_SOURCE_SUFFIXES))
        for f in files:
            h.update(f"\0{name}:{f.name}:".encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _read(folder: Path) -> dict:
    try:
        data = json.loads((folder / DERIVED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def reusable(folder: Path, name: str, digest: str) -> Path | None:
    """``folder / name`` when it was derived from inputs with this ``digest`` and is unchanged
    since; else None (compute it again)."""
    path = folder / name
    entry = _read(folder).get(name)
    if not isinstance(entry, dict) or entry.get("inputs") != digest or not path.is_file():
        return None
    return path if file_sha256(path) == entry.get("sha256") else None


def record(folder: Path, name: str, digest: str) -> None:
    """Record that ``folder / name`` (just written) derives from inputs with ``digest``."""
    data = _read(folder)
    data[name] = {"inputs": digest, "sha256": file_sha256(folder / name)}
    write_atomically(folder / DERIVED_FILE, json.dumps(data, indent=2, sort_keys=True) + "\n")
