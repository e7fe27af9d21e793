"""A small bounded mapping with least-recently-used eviction, for the guard's decision caches.

The guard's decisions are pure functions of the SQL text for a fixed policy and snapshot (a
statement filter, a worker pool), so the same text is decided once: an evaluation runs every
case at least three times and freezing, verifying and re-grading repeat the same texts.

Every guard cache is bounded twice: in entries and in **bytes** (an estimate of what each
entry keeps alive, :func:`deep_size`). Keys are digests of the text (:func:`text_key`, 32
bytes), never the text itself, and values are small verdicts (never parse trees): a cache of
4,096 verdicts on 20 KB statements costs a few megabytes, not gigabytes.

>>> c = LRU(2)
>>> c.put("a", 1); c.put("b", 2); c.get("a"); c.put("c", 3)
1
>>> c.get("b") is None, c.get("a"), c.get("c"), len(c)
(True, 1, 3, 2)
>>> b = LRU(100, max_bytes=1000)
>>> b.put("k1", "x" * 600); b.put("k2", "y" * 600)   # both do not fit: the older goes
>>> b.get("k1") is None, b.get("k2") is not None, b.nbytes <= 1000
(True, True, True)
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: default byte bound of one guard cache
DEFAULT_MAX_BYTES = 32 << 20


def text_key(text: str) -> bytes:
    """The cache key of a SQL text: its SHA-256 (any code point, lone surrogates included)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def deep_size(obj: Any, _seen: set[int] | None = None, _depth: int = 0) -> int:
    """Bytes an object keeps alive, estimated: ``sys.getsizeof`` over strings, bytes,
    numbers, tuples, lists, sets, dicts and dataclasses, recursively (shared objects once).

    >>> deep_size("x" * 1000) >= 1000, deep_size({"a": ["x" * 500] * 3}) < 2000
    (True, True)
    """
    seen = _seen if _seen is not None else set()
    if id(obj) in seen or _depth > 64:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj, 64)
    if isinstance(obj, (str, bytes, bytearray, int, float, bool, type(None))):
        return size
    if isinstance(obj, dict):
        items: Any = [x for kv in obj.items() for x in kv]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = obj
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        items = [getattr(obj, f.name, None) for f in dataclasses.fields(obj)]
    elif hasattr(obj, "__dict__"):
        items = list(vars(obj).values())
    else:
        return size
    return size + sum(deep_size(x, seen, _depth + 1) for x in items)


class LRU(Generic[K, V]):
    """Thread-safe; ``get`` returns None for a missing key.

    ``size`` bounds the entries, ``max_bytes`` the bytes they keep alive as measured by
    ``weigh(key, value)`` (default: :func:`deep_size` of both). An entry heavier than
    ``max_bytes`` on its own is not kept.
    """

    def __init__(self, size: int = 4096, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 weigh: Callable[[K, V], int] | None = None) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self._weigh = weigh or (lambda k, v: deep_size(k) + deep_size(v))
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.nbytes = 0

    def get(self, key: K) -> V | None:
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return None
            self._data.move_to_end(key)
            return entry[0]

    def put(self, key: K, value: V) -> None:
        weight = self._weigh(key, value) + 100  # + the OrderedDict entry itself
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.nbytes -= old[1]
            if weight > self.max_bytes:
                return
            self._data[key] = (value, weight)
            self.nbytes += weight
            while len(self._data) > self.size or self.nbytes > self.max_bytes:
                _, (_, w) = self._data.popitem(last=False)
                self.nbytes -= w

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.nbytes = 0

    def __len__(self) -> int:
        return len(self._data)


__all__ = ["DEFAULT_MAX_BYTES", "LRU", "deep_size", "text_key"]
