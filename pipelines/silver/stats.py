"""What one silver micro-batch did: its counts per table and per quarantine reason, and the
time of each of its steps (:class:`BatchStats`, the newest kept by ``SilverBatch.history``
and passed to the metrics hook); and what a query's batches did together (:class:`RunTotals`,
``SilverBatch.totals``: a long-running stream keeps its sums, not every batch)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Row

    from .plan import TablePlan
    from .resolution import KeyCounts


@dataclass
class BatchStats:
    """What one micro-batch did (kept for the summary and for tests)."""

    batch_id: int
    records: int = 0
    silver: dict[str, int] = field(default_factory=dict)
    quarantined: dict[str, int] = field(default_factory=dict)
    schema_keys: int = 0
    seconds: float = 0.0
    # seconds of each step that ran (collect, frame, resolve, plan, quarantine, decode, check,
    # write), in order: where a slow batch's time went
    steps: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the step ``name`` (added to :attr:`steps`, even when it fails: a failed
        batch's log line shows them)."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.steps[name] = round(time.monotonic() - t0, 3)

    def count_outcome(
        self, counts: KeyCounts, written: Sequence[TablePlan], quarantined: Sequence[Row]
    ) -> None:
        """Rows per silver table and per quarantine reason, from the batch's records per
        schema key and the quarantine's rows counted by ``(reason_code, _message_type)`` (no
        Spark job). A table's rows: its versions' records less those quarantined."""
        per_key = counts.per_value_key()
        lost: dict[str, int] = defaultdict(int)
        for row in quarantined:
            reason, n = row["reason_code"], int(row["count"])
            self.quarantined[reason] = self.quarantined.get(reason, 0) + n
            if row["_message_type"] is not None:
                lost[row["_message_type"]] += n
        for plan in written:
            keys = [r.schema_key for r in plan.versions] + [c.schema_key for c, _ in plan.conflicts]
            arrived = sum(per_key.get(key, 0) for key in keys)
            self.silver[plan.table] = arrived - lost.get(plan.message_type, 0)


#: how many of its newest batches a query keeps (``SilverBatch.history``)
HISTORY_KEPT = 1000


@dataclass
class RunTotals:
    """What all the batches of one query did, summed as each batch ends."""

    batches: int = 0
    records: int = 0
    quarantined: dict[str, int] = field(default_factory=dict)
    tables: set[str] = field(default_factory=set)

    def add(self, stats: BatchStats) -> None:
        """Count one more batch."""
        self._sum(1, stats.records, stats.quarantined, stats.silver)

    def merge(self, other: RunTotals) -> None:
        """Count another query's batches too."""
        self._sum(other.batches, other.records, other.quarantined, other.tables)

    def _sum(
        self, batches: int, records: int, quarantined: dict[str, int], tables: Iterable[str]
    ) -> None:
        self.batches += batches
        self.records += records
        for reason, n in quarantined.items():
            self.quarantined[reason] = self.quarantined.get(reason, 0) + n
        self.tables.update(tables)
