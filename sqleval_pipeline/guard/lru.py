"""A small bounded mapping with least-recently-used eviction, for the guard's decision caches.

The guard's decisions are pure functions of the SQL text for a fixed policy and snapshot (a
statement filter, a worker pool), so the same text is decided once: an evaluation runs every
case at least three times and freezing, verifying and re-grading repeat the same texts.

>>> c = LRU(2)
>>> c.put("a", 1); c.put("b", 2); c.get("a"); c.put("c", 3)
1
>>> c.get("b") is None, c.get("a"), c.get("c"), len(c)
(True, 1, 3, 2)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """Thread-safe; ``get`` returns None for a missing key."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)
