"""Step 7 of a silver micro-batch: the silver tables, the quarantine and the quality results,
committed at the same time (``lakehouse.streaming.run_together``), each its own Delta
transaction that Delta skips when it is already committed (``pipelines.silver.batch`` says
why a retry writes what the first attempt wrote).

A silver table this query has not written yet (since its last failed batch) is created
first when missing; with a silver catalog
database, with the comment and properties its catalog entry shows
(``SilverRegistration.creation_description``) in its creating commit: registering it then
changes nothing in its Delta log.

A table's rows are a DataFrame (the Spark path) or Arrow (the driver path, ``driver_pass``).
A small batch of a local table is appended by delta-rs (``lakehouse.driver_append``): Arrow
rows as they are, a DataFrame's rows collected first; Spark appends the others (a large batch,
an object store, rows that change the table's schema, a table delta-rs refuses).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeAlias

import pyarrow as pa
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import types as T  # noqa: N812

from lakehouse.delta import Replays, append_idempotent
from lakehouse.driver_append import append_arrow, appends_in_driver, collect_arrow
from lakehouse.driver_tables import create_table
from lakehouse.layout import Layout
from lakehouse.materialized import materialize
from lakehouse.streaming import run_together
from lakehouse.tables import is_delta_table
from pipelines.quarantine import QUARANTINE_SCHEMA

from .arrow_rows import commented
from .plan import TablePlan, table_schema
from .registration import SilverRegistration
from .resolution import KeyCounts
from .retried import settle, settles
from .tables import as_frame, ensure_table, union_all, write_partitions
from .written_schemas import WRITTEN_SCHEMAS, Stamp

log = logging.getLogger("pipelines.silver")

#: a table's rows in a batch: a DataFrame, or Arrow for a small batch decoded in the driver
Rows: TypeAlias = DataFrame | pa.Table
#: quarantine rows of a batch: a DataFrame, or Arrow picked in the driver (``arrow_rejects``)
Rejects: TypeAlias = DataFrame | pa.Table


class BatchWrites:
    """The writes of one silver query's batches (see the module docstring).

    Args:
        spark: the session.
        layout: the lakehouse's layout.
        app_id: the idempotent-write app id of the query's checkpoint.
        replays: which batches an earlier run of the query may have written.
        lock: held while creating a table (concurrent queries share the driver).
        registration: registers the tables written in the catalog.
        checker: writes the quality results (a ``quality.checker.QualityChecker``) or None.
        quarantine_writer: writes the batch's quarantine rows instead of appending them.
    """

    def __init__(
        self,
        spark: SparkSession,
        layout: Layout,
        *,
        app_id: str,
        replays: Replays,
        lock: threading.RLock,
        registration: SilverRegistration,
        checker: Any = None,
        quarantine_writer: Callable[[DataFrame, int], None] | None = None,
    ) -> None:
        self.spark = spark
        self.layout = layout
        self.app_id = app_id
        self.replays = replays
        self._lock = lock
        self.registration = registration
        self.checker = checker
        self.quarantine_writer = quarantine_writer
        # message columns of each table as this driver's queries last wrote it (shared)
        self.schemas = WRITTEN_SCHEMAS
        self._ensured: set[str] = set()  # the tables this query created or found
        self._quarantine_table = False  # the quarantine table is known to exist

    def __call__(
        self,
        to_write: list[tuple[TablePlan, Rows]],
        quarantine_parts: list[Rejects],
        results: list[Any],
        batch_id: int,
        counts: KeyCounts,
        persisted: list[DataFrame],
    ) -> list[Row]:
        """Commit the batch's writes; return the quarantine's counts per reason and message
        type.

        The quarantine rows are computed once: for a small batch of a local lakehouse, in the
        driver (Arrow parts as they are, else collected: :meth:`_collect_quarantine`); else
        computed in the executors (``lakehouse.materialized``: at the batch's parallelism, which a small
        append reads in one task: :func:`write_partitions`) and counted. They are appended only
        when there are some or to create the table: an empty append would be a Delta commit
        for nothing; a retry counts the same rows. Replay's ``quarantine_writer`` runs after
        the appends. The batch a checkpointed stream runs again after a restart is settled
        first (``retried.settle``): each record keeps the place its first attempt landed it
        in, and the counts are then those of the quarantine rows this attempt still commits
        (the batch's stats of such a retry are approximate).
        """
        owed: list[Callable[[], None]] = []
        if self.quarantine_writer is None and settles(self.replays, batch_id):
            settled = settle(
                self.spark,
                self.layout,
                self.app_id,
                self.replays,
                batch_id,
                to_write,
                quarantine_parts,
                persisted,
            )
            if settled is not None:
                to_write, quarantine_parts, owed = (
                    list(settled.tables),
                    list(settled.quarantine),
                    settled.owed,
                )
        quarantine, quarantined, write_quarantine = self._quarantine_rows(
            quarantine_parts, batch_id, counts.records, persisted
        )
        commits: list[Callable[[], None]] = [
            partial(self._table, plan, df, batch_id, counts) for plan, df in to_write
        ]
        commits += owed
        if self.quarantine_writer is None and (quarantined or not self._has_quarantine_table()):
            commits.append(write_quarantine)
        if results:
            commits.append(partial(self._results, results, batch_id))
        run_together(commits)
        if self.quarantine_writer is not None:
            assert quarantine is not None  # replay's writer takes the DataFrame way
            self.quarantine_writer(quarantine, batch_id)
        return quarantined

    def _quarantine_rows(
        self, parts: list[Rejects], batch_id: int, records: int, persisted: list[DataFrame]
    ) -> tuple[DataFrame | None, list[Row], Callable[[], None]]:
        """The batch's quarantine rows, their counts per reason and message type, and their
        append: nothing to compute when no part is left (each known to be empty); in the
        driver for a small batch of a local lakehouse (Arrow parts as they are); else kept in
        the executors."""
        in_arrow = self._arrow_quarantine(parts, records)
        if in_arrow is not None:
            rows = pa.concat_tables(in_arrow)
            if rows.num_rows:
                write = partial(self._quarantine_collected, rows, QUARANTINE_SCHEMA, batch_id)
                return None, _reason_counts(rows), write
            parts = []
        quarantine = union_all([as_frame(self.spark, p, QUARANTINE_SCHEMA) for p in parts])
        if quarantine is None:
            empty = self.spark.createDataFrame([], QUARANTINE_SCHEMA)
            return empty, [], partial(self._create_quarantine, empty, batch_id)
        collected = self._collect_quarantine(quarantine, records)
        if collected is not None:
            rows, quarantined = collected
            return (
                quarantine,
                quarantined,
                partial(self._quarantine_collected, rows, quarantine.schema, batch_id),
            )
        quarantine = materialize(quarantine)
        persisted.append(quarantine)
        quarantined = quarantine.groupBy("reason_code", "_message_type").count().collect()
        total = sum(int(row["count"]) for row in quarantined)
        return (
            quarantine,
            quarantined,
            partial(self._quarantine_by_spark, quarantine, batch_id, total),
        )

    def _collect_quarantine(
        self, quarantine: DataFrame, records: int
    ) -> tuple[pa.Table, list[Row]] | None:
        """A small batch's quarantine rows in the driver, with their counts per reason and
        message type (one Spark job: computing the rows); None when they stay in the
        executors (a large batch, an object store, replay's writer, rows that cannot be
        collected)."""
        if self.quarantine_writer is not None:
            return None
        if not appends_in_driver(self.layout.quarantine, records):
            return None
        rows = collect_arrow(quarantine, self.layout.quarantine)
        if rows is None:
            return None
        return rows, _reason_counts(rows)

    def _arrow_quarantine(self, parts: list[Rejects], records: int) -> list[pa.Table] | None:
        """The parts as Arrow when every one is, and a small batch of a local lakehouse
        appends them in the driver (no replay writer); else None: the DataFrame way."""
        if self.quarantine_writer is not None or not parts:
            return None
        if not all(isinstance(p, pa.Table) for p in parts):
            return None
        if not appends_in_driver(self.layout.quarantine, records):
            return None
        return [p for p in parts if isinstance(p, pa.Table)]

    def known_schema(self, path: str) -> tuple[T.StructType | None, Stamp]:
        """The message columns of the table at ``path`` as a query of this driver last wrote
        it (None: not known), with the stamp the table's write gives back
        (``written_schemas``)."""
        return self.schemas.read(path)

    def forget_schemas(self) -> None:
        """Forget what this driver's queries wrote (a batch failed: another writer may have
        changed the tables; the next batch ensures its tables again)."""
        self.schemas.clear()
        self._ensured.clear()

    def _table(self, plan: TablePlan, df: Rows, batch_id: int, counts: KeyCounts) -> None:
        """One silver table's append (the table created first when this query has not)."""
        assert plan.merged is not None
        topics = counts.topics_of(r.schema_key for r in plan.versions)
        if plan.path not in self._ensured:
            comment, properties = self.registration.creation_description(plan, topics)
            with self._lock:
                ensure_table(
                    self.spark,
                    plan.path,
                    table_schema(plan.merged),
                    plan.message_type,
                    comment=comment,
                    properties=properties,
                )
        arrived = counts.records_of(r.schema_key for r in plan.versions)  # >= the table's rows
        schema = table_schema(plan.merged)
        if isinstance(df, pa.Table):
            in_driver = self._arrow_in_driver(df, plan.path, batch_id, schema)
            if not in_driver:
                df = self.spark.createDataFrame(df, schema=schema)
        else:
            in_driver = self._in_driver(df, plan.path, batch_id, arrived, schema)
        if not in_driver:
            append_idempotent(
                write_partitions(df, arrived),
                plan.path,
                self.app_id,
                batch_id,
                replays=self.replays,
                merge_schema=True,
                logger=log,
            )
        self._ensured.add(plan.path)
        self.schemas.store(plan.path, plan.stamp, plan.merged)
        self.registration.silver_table(plan, topics)

    def _has_quarantine_table(self) -> bool:
        """Whether the quarantine table exists (asked until it does). A clean batch creates it
        for its readers (:meth:`_create_quarantine`; ``pipelines.quarantine.
        ensure_quarantine_table`` does, before any batch, when a catalog names it)."""
        if not self._quarantine_table:
            self._quarantine_table = is_delta_table(self.layout.quarantine, self.spark)
        return self._quarantine_table

    def _in_driver(
        self, df: DataFrame, path: str, batch_id: int, records: int, schema: T.StructType
    ) -> bool:
        """Append a small batch's rows to the local table at ``path`` with delta-rs
        (``lakehouse.driver_append``); False, with nothing written, when Spark must append
        them (a large batch, an object store, a table that is not there, rows that change
        its schema other than by adding columns or struct fields)."""
        if not appends_in_driver(path, records):
            return False
        rows = collect_arrow(df, path)
        return rows is not None and self._append_arrow(rows, path, batch_id, schema)

    def _arrow_in_driver(
        self, rows: pa.Table, path: str, batch_id: int, schema: T.StructType
    ) -> bool:
        """Append Arrow rows to the local table at ``path`` with delta-rs; False, with
        nothing written, when Spark must append them (as :meth:`_in_driver`)."""
        return appends_in_driver(path, rows.num_rows) and self._append_arrow(
            rows, path, batch_id, schema
        )

    def _append_arrow(self, rows: pa.Table, path: str, batch_id: int, schema: T.StructType) -> bool:
        """delta-rs appends ``rows``; rows that do not fit the table's schema are tried once
        more, merging the columns and struct fields they add, with their comments from the
        table's Spark ``schema`` (the columns of a new schema version)."""
        if append_arrow(
            self.spark, rows, path, self.app_id, batch_id, replays=self.replays, logger=log
        ):
            return True
        return append_arrow(
            self.spark,
            commented(rows, schema),
            path,
            self.app_id,
            batch_id,
            replays=self.replays,
            logger=log,
            merge_schema=True,
        )

    def _create_quarantine(self, empty: DataFrame, batch_id: int) -> None:
        """Create the quarantine table (a batch with no quarantine rows, no table yet): by
        delta-rs when it is local (``lakehouse.driver_tables``), else by Spark's empty
        append."""
        with self._lock:
            created = create_table(self.spark, self.layout.quarantine, QUARANTINE_SCHEMA)
        if created:
            self._quarantine_table = True
            return
        self._quarantine_by_spark(empty, batch_id, 0)

    def _quarantine_collected(self, rows: pa.Table, schema: T.StructType, batch_id: int) -> None:
        """The quarantine's append of rows collected into the driver (Spark's when delta-rs
        cannot append them: another schema, a table delta-rs cannot create or write); a
        local table not there yet is created by delta-rs first."""
        path = self.layout.quarantine
        if not self._has_quarantine_table():
            with self._lock:
                create_table(self.spark, path, QUARANTINE_SCHEMA)
        if append_arrow(
            self.spark, rows, path, self.app_id, batch_id, replays=self.replays, logger=log
        ):
            self._quarantine_table = True
            return
        collected = self.spark.createDataFrame(rows, schema=schema)
        self._quarantine_by_spark(collected, batch_id, rows.num_rows)

    def _quarantine_by_spark(self, quarantine: DataFrame, batch_id: int, rows: int) -> None:
        """The quarantine's append by Spark (``rows``: how many; a large batch's, an object
        store's, or rows delta-rs did not take)."""
        append_idempotent(
            write_partitions(quarantine, rows),
            self.layout.quarantine,
            self.app_id,
            batch_id,
            replays=self.replays,
            logger=log,
        )
        self._quarantine_table = True

    def quality_results(self, results: list[Any], batch_id: int) -> None:
        """Write the batch's quality results under this query's app id (they replace those
        of the same batch); a failing batch's too, before it raises."""
        self.checker.write_results(results, batch_id, source=self.app_id)

    def _results(self, results: list[Any], batch_id: int) -> None:
        self.quality_results(results, batch_id)
        self.registration.quality_results(self.layout.quality_results)


def _reason_counts(rows: pa.Table) -> list[Row]:
    """Quarantine rows counted per reason code and message type (as the Spark way's
    ``groupBy(...).count()``)."""
    groups = rows.group_by(["reason_code", "_message_type"]).aggregate([([], "count_all")])
    return [
        Row(reason_code=g["reason_code"], _message_type=g["_message_type"], count=g["count_all"])
        for g in groups.to_pylist()
    ]
