"""What a driver's silver queries last wrote of each silver table's message columns
(:class:`WrittenSchemas`): saves reading a table's Delta log every batch, and is shared by the
driver's queries, so that two of them writing one table (a message type on two topics) each
plan against what the other added.

A query reads an entry with its stamp before planning (:meth:`WrittenSchemas.read`) and,
after its append, stores the columns it wrote only if no other query stored any since
(:meth:`WrittenSchemas.store`); otherwise the entry goes, and the next plan reads the table's
log: with queries appending at once, the table holds the union of what they wrote, which no
single query's plan knows.
"""

from __future__ import annotations

import threading
from itertools import count

from pyspark.sql import types as T  # noqa: N812 - pyspark's usual alias

#: a stamp of :meth:`WrittenSchemas.read`: what an entry was when a plan read it
Stamp = int


class WrittenSchemas:
    """Message columns per silver table path, each entry with a stamp that changes whenever
    it is stored, removed or cleared."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._schemas: dict[str, T.StructType] = {}
        self._stamps: dict[str, Stamp] = {}
        self._next = count(1)
        self._cleared: Stamp = 0  # stamps at or below it are stale

    def read(self, path: str) -> tuple[T.StructType | None, Stamp]:
        """The columns last stored for ``path`` (None: none known) and the entry's stamp."""
        with self._lock:
            return self._schemas.get(path), max(self._stamps.get(path, 0), self._cleared)

    def store(self, path: str, stamp: Stamp, schema: T.StructType) -> None:
        """Keep ``schema`` for ``path`` if the entry is as it was when ``stamp`` was read;
        else forget the entry (another query changed the table meanwhile)."""
        with self._lock:
            unchanged = max(self._stamps.get(path, 0), self._cleared) == stamp
            if unchanged:
                self._schemas[path] = schema
            else:
                self._schemas.pop(path, None)
            self._stamps[path] = next(self._next)

    def clear(self) -> None:
        """Forget every entry (a batch failed: another writer may have changed the tables);
        stamps read before are stale."""
        with self._lock:
            self._schemas.clear()
            self._stamps.clear()
            self._cleared = next(self._next)


#: the driver's (one per process: its queries share it)
WRITTEN_SCHEMAS = WrittenSchemas()
