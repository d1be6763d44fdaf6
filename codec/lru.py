"""A small thread-safe LRU map with optional per-entry expiry (the registry client's caches).

`get` returns None for a key that is absent or whose time to live has passed (and forgets it);
`put` evicts the least recently used entries beyond `max_size`. Times are `time.monotonic()`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict


class LruCache:
    """A bounded map: least recently used entries go first, expired ones are never returned."""

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        self._data: OrderedDict[object, tuple[float | None, object]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: object) -> object | None:
        """The value of `key`, or None when absent or expired."""
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return None
            expires, value = entry
            if expires is not None and expires < time.monotonic():
                del self._data[key]
                return None
            self._data.move_to_end(key)
            return value

    def put(self, key: object, value: object, ttl: float | None = None) -> None:
        """Remember `value` for `key`, for `ttl` seconds (None: until evicted)."""
        with self._lock:
            expires = None if ttl is None else time.monotonic() + ttl
            self._data[key] = (expires, value)
            self._data.move_to_end(key)
            while len(self._data) > self._max_size:
                self._data.popitem(last=False)
