"""A silver batch that Spark runs again after a restart, settled against what its first
attempt landed: each of its records lands once, in one place.

Each destination of a batch (a silver table, the quarantine) is a Delta commit of its own,
which Delta skips when the batch landed there already (``lakehouse.delta.append_idempotent``).
A retry routes the batch anew, and the routing can change when something outside the batch
changed in between:

- another writer changed a silver table, so a schema version that fitted it is now a
  ``SCHEMA_CONFLICT`` (the first attempt's append failed, its quarantine commit landed);
- the registry now answers a schema id it did not (an ``UNKNOWN_SCHEMA`` record that the first
  attempt quarantined now decodes).

Skipping per destination would then lose a record (routed now to a destination that landed
without it) or keep it twice (landed in one destination, routed now to another).
:func:`settle` prevents both. It reads which of the batch's records the landed destinations
hold, by their Kafka coordinates (``pipelines.quarantine.RECORD_KEY``), and takes those
records out of every destination's rows. A landed destination's remaining rows, those it is
owed now, go in a commit of their own under an app id of that attempt's own,
``<app id>/retry/<nonce>``: a lost race is retried once (``commit_once``), and an earlier
attempt's commit for the same batch, which held other rows, must not pass for this one's.
So a record keeps the place the first attempt gave it, and one the first attempt did not land
goes where the retry routes it.

Only the batch a checkpointed stream runs again is settled (``Replays.planned_ms`` is set:
``lakehouse.checkpoints.replays_of``). Callers that read no checkpoint treat every batch as a
possible replay, and settling each one would read every silver table's log every batch.
Replay's own writer (``protolake replay``) is not settled: its batches are quarantine rows
already.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial, reduce

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - pyspark's usual alias
from pyspark.sql import types as T  # noqa: N812

from lakehouse.delta import HistoryCleanedError, Replays, append_idempotent, batch_landed
from lakehouse.layout import SILVER, Layout, location_key
from lakehouse.materialized import materialize
from lakehouse.tables import list_delta_tables
from pipelines.quarantine import QUARANTINE_SCHEMA, RECORD_KEY

from .plan import TablePlan, table_schema
from .tables import as_frame, union_all

log = logging.getLogger(__name__)

#: the app id suffix of the commits that give a landed destination what a retry owes it
RETRY_APP_SUFFIX = "/retry"


def settles(replays: Replays, batch_id: int) -> bool:
    """Whether batch ``batch_id`` is one a checkpointed stream runs again (see the module
    docstring)."""
    return replays.planned_ms is not None and replays.may_be_written(batch_id)


@dataclass(frozen=True)
class Settled:
    """A retried batch's writes once settled.

    Attributes:
        tables: each silver table's rows, less the records a landed destination holds.
        quarantine: the quarantine's rows, likewise (one part).
        owed: the commits that give each landed destination the rows it is owed now.
    """

    tables: list[tuple[TablePlan, DataFrame]]
    quarantine: list[DataFrame]
    owed: list[Callable[[], None]]


def settle(
    spark: SparkSession,
    layout: Layout,
    app_id: str,
    replays: Replays,
    batch_id: int,
    tables: Sequence[tuple[TablePlan, DataFrame | pa.Table]],
    quarantine: Sequence[DataFrame | pa.Table],
    persisted: list[DataFrame],
) -> Settled | None:
    """Batch ``batch_id``'s writes settled against the destinations its first attempt landed
    (see the module docstring); None when it landed nowhere (its writes stand as they are).
    The records held are read once and kept (freed with the batch: ``persisted``)."""
    own = [plan.path for plan, _ in tables]
    landed = _landed(spark, layout, own, app_id, batch_id, replays.planned_ms)
    if not landed:
        return None
    frames = [(plan, as_frame(spark, rows, table_schema(_merged(plan)))) for plan, rows in tables]
    rejects = union_all([as_frame(spark, part, QUARANTINE_SCHEMA) for part in quarantine])
    routed = [rows.select(*RECORD_KEY) for _, rows in frames]
    if rejects is not None:
        routed.append(rejects.select(*RECORD_KEY))
    batch = union_all(routed)
    spans = [] if batch is None else _spans(batch)
    if batch is None or not spans:
        return None
    held = materialize(_held(spark, landed.values(), batch.distinct(), spans))
    persisted.append(held)
    log.warning(
        "batch %d ran again after a restart and had landed in %s: its records keep the "
        "places they landed in",
        batch_id,
        ", ".join(sorted(landed.values())),
    )

    def unheld(rows: DataFrame, path: str) -> DataFrame:
        """``rows`` less the records held; kept when a landed destination is owed them (its
        commit looks whether there are any, then appends them)."""
        left = rows.join(held, list(RECORD_KEY), "left_anti")
        if location_key(path) not in landed:
            return left
        kept = materialize(left)
        persisted.append(kept)
        return kept

    settled = [(plan, unheld(rows, plan.path)) for plan, rows in frames]
    owed: list[Callable[[], None]] = [
        partial(_owe, rows, plan.path, app_id, batch_id, True)
        for plan, rows in settled
        if location_key(plan.path) in landed
    ]
    parts: list[DataFrame] = []
    if rejects is not None:
        left = unheld(rejects, layout.quarantine).select(*QUARANTINE_SCHEMA.names)
        parts.append(left)
        if location_key(layout.quarantine) in landed:
            owed.append(partial(_owe, left, layout.quarantine, app_id, batch_id, False))
    return Settled(settled, parts, owed)


def _landed(
    spark: SparkSession,
    layout: Layout,
    own: Sequence[str],
    app_id: str,
    batch_id: int,
    planned_ms: int | None,
) -> dict[str, str]:
    """The silver tables and the quarantine that hold batch ``batch_id`` of ``app_id``, by
    :func:`lakehouse.layout.location_key`: the batch's ``own`` tables and the quarantine, and every other silver
    table too (one the first attempt wrote may be one the retry routes nothing to). Another
    table whose history was cleaned past the batch's start is taken as not holding it (it
    cannot be told, and most likely it is another query's): a warning says so."""
    candidates = {location_key(p): p for p in [*own, layout.quarantine]}
    landed = {
        k: p for k, p in candidates.items() if batch_landed(spark, p, app_id, batch_id, planned_ms)
    }
    for path in list_delta_tables(layout.layer(SILVER), spark):
        if location_key(path) in candidates:
            continue
        try:
            if batch_landed(spark, path, app_id, batch_id, planned_ms):
                landed[location_key(path)] = path
        except HistoryCleanedError as exc:
            log.warning("batch %d: taken as not in %s (%s)", batch_id, path, exc)
    return landed


def _spans(batch: DataFrame) -> list[tuple[str, int, int, int]]:
    """The offsets ``batch``'s records span, per topic and partition."""
    spans = batch.groupBy(*RECORD_KEY[:2]).agg(
        F.min(RECORD_KEY[2]).alias("low"), F.max(RECORD_KEY[2]).alias("high")
    )
    return [tuple(row) for row in spans.collect()]  # type: ignore[misc]


def _held(
    spark: SparkSession,
    paths: Iterable[str],
    batch: DataFrame,
    spans: Sequence[tuple[str, int, int, int]],
) -> DataFrame:
    """The coordinates of ``batch``'s records that the tables at ``paths`` hold, each table
    read within the offsets the batch ``spans`` (Delta skips the files outside them where the
    table keeps statistics for those columns)."""
    within = reduce(Column.__or__, [_span(*span) for span in spans])
    found = [
        spark.read.format("delta").load(p).where(within).select(*RECORD_KEY) for p in sorted(paths)
    ]
    held = union_all(found)
    assert held is not None  # paths is not empty
    return held.join(batch, list(RECORD_KEY), "left_semi").distinct()


def _span(topic: str, partition: int, low: int, high: int) -> Column:
    topic_col, partition_col, offset_col = (F.col(c) for c in RECORD_KEY)
    return (topic_col == topic) & (partition_col == partition) & offset_col.between(low, high)


def _owe(rows: DataFrame, path: str, app_id: str, batch_id: int, merge_schema: bool) -> None:
    """Append what a landed destination is owed, unless there is nothing. Not looked up
    first: the rows are those no destination holds now, whatever an earlier attempt
    appended. The app id is this attempt's own (:func:`retry_app_id`), so a lost race is
    retried once (``commit_once``) unless this very commit landed."""
    if rows.isEmpty():
        return
    append_idempotent(
        rows,
        path,
        retry_app_id(app_id),
        batch_id,
        replays=Replays(fresh_from=batch_id),
        merge_schema=merge_schema,
        logger=log,
    )


def retry_app_id(app_id: str) -> str:
    """The app id of one attempt's commit of owed rows: ``<app id>/retry/<nonce>``."""
    return f"{app_id}{RETRY_APP_SUFFIX}/{uuid.uuid4().hex[:16]}"


def _merged(plan: TablePlan) -> T.StructType:
    assert plan.merged is not None  # a plan with rows to write has its table's schema
    return plan.merged
