"""One silver micro-batch: bronze rows -> silver tables + quarantine, in ONE ``foreachBatch``.

:class:`SilverBatch` runs these steps, each a method of its own (the writes of step 7 are
``writes.BatchWrites``):

0. collect (``driver_pass``): a small batch (at most ``driver_records`` records) is read into
   the driver once, as Arrow, and takes the driver path: framed record by record (step 1),
   decoded (step 5), its tables' rows assembled (``arrow_rows``), checked
   (``QualityChecker.validate_arrow``, step 6) and appended by delta-rs (step 7) in the
   driver, and so are its quarantine rows (``arrow_rejects``, steps 4 to 6). Any other
   batch takes the Spark path the steps below describe; both land the same rows;
1. frame (``framing``): the JVM cuts each record's frame head; the driver reads each distinct
   head once into a ``codec.SchemaKey`` and a payload offset (``record_framing`` frames the
   few records a head is not enough for, in Python); the batch's largest record chooses how
   its records are cut into Arrow batches for the Python workers (``arrow_batches``), its
   record count how the later steps' expressions are evaluated (``evaluation``);
2. resolve the distinct schema keys on the driver, once each (``resolution``);
   ``RegistryUnavailable`` fails the batch (nothing is quarantined for an outage);
3. plan each table's schema (``plan``): compatible versions are merged, others go to
   quarantine with ``SCHEMA_CONFLICT``;
4. quarantine bad frames, failed resolutions and schema conflicts with their raw bytes
   (steps 4 to 6 ask the batch's path, ``spark_path.LargeBatch`` or the driver path's
   ``driver_pass.SmallBatch``, for its quarantine rows and decoded versions);
5. decode the records of every schema version in one pass through the Python workers, kept
   computed for the later steps (``decode_pass.decode_all``, ``lakehouse.materialized``); rows that
   fail go to quarantine with their raw bytes; a table none of whose records decoded is left
   out of the later steps (no row to check or write; known where the failures are counted:
   the driver path and a local master's Spark path);
6. check quality (``checks.BatchChecks``: the default suite plus the configured rules), the
   tables at the same time (``lakehouse.streaming.run_together``): failed rows go to
   quarantine (``DQ_FAILED``); a ``fail`` policy fails the batch before any write;
7. write the silver tables, the quarantine (when it has rows) and the quality results, the
   commits at the same time (``writes``): the appends name the app id and batch id
   (``lakehouse.delta.append_idempotent``), the quality results replace those of the same
   (app id, batch id);
8. count, for the summary and the metrics (:class:`pipelines.silver.stats.BatchStats`).

A batch that fails after some of its writes committed is run again with the same batch id and
the same bronze rows (Spark's offset log), and the writes already committed are skipped. The
steps therefore decide the same way on a retry wherever the batch alone decides: in particular
the quality rules' "now" is the batch's reference time, the latest ``_ingested_at`` of its
bronze rows (:func:`framing.batch_reference_time`), never the wall clock. With the wall clock, a
record quarantined on the first attempt (silver appended without it, then a crash before the
quarantine append) could pass on the retry and go into a silver append Delta skips: lost. What
lies outside the batch can still change between attempts: another writer can change a silver
table's schema (a version that fitted is now a conflict), the registry can answer a schema id
it did not. So the batch a restarted stream runs again is settled against what its first
attempt landed (``retried.settle``): each record keeps the place it landed in, and a record
the first attempt did not land goes where the retry routes it, in a commit of its own when
its destination already has the batch.

Every bronze record ends in exactly one silver table or in quarantine
(:func:`pipelines.quarantine.check_invariant` checks it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T  # noqa: N812

from codec import SchemaKey, SchemaResolver
from lakehouse.bronze_columns import INGESTED_AT, RECORD_COLUMNS
from lakehouse.catalog import CatalogDatabases
from lakehouse.delta import ANY_BATCH_MAY_BE_REPLAYED, Replays
from lakehouse.layout import Layout
from lakehouse.materialized import keeps_as_leaf, materialize, release

from .arrow_batches import ArrowBatches
from .arrow_rows import table_rows as arrow_table_rows
from .arrow_rows import union_rows
from .checks import BatchChecks
from .decode import DecodeSpec
from .decode_pass import DecodedVersion
from .driver_pass import DRIVER_RECORDS, SmallBatch, collect_small
from .evaluation import ExpressionEvaluation
from .frame_heads import head_counts
from .framing import FramedBatch, Heads, batch_reference_time
from .plan import TablePlan, plan_tables, table_rows
from .record_framing import python_framed
from .registration import SilverRegistration
from .rejects import quarantine_time
from .resolution import KeyCounts, Resolved, resolve_schema_keys
from .spark_path import LargeBatch
from .stats import HISTORY_KEPT, BatchStats, RunTotals
from .tables import existing_schema, message_part, union_all
from .writes import BatchWrites, Rejects, Rows

log = logging.getLogger("pipelines.silver")
# Table creation, catalog registration and resolver calls of concurrent queries (processing-time
# runs one query per bronze table in driver threads) go one at a time.
_DRIVER_LOCK = threading.RLock()


class SilverBatch:
    """The ``foreachBatch`` function of one silver query (see the module docstring).

    Args:
        spark: the session.
        lakehouse_path: the lakehouse root.
        app_id: the idempotent-write app id of this query's checkpoint.
        resolver: shared schema resolver (its cache outlives batches and queries).
        max_depth: recursion depth of message columns (``silver.max_recursion_depth``).
        allow_unknown_fields: keep rows with unknown fields (``silver.keep_unknown_fields``).
        native: decode with the compiled decoder where it applies (``silver.native_decoder``).
        cache_bronze: keep the batch's bronze rows in executor memory for the passes over it
            (``silver.cache_bronze``); off, each pass reads them again (faster when that read
            is cheap: ``bench/silver_bench.py``; ``pipelines.metrics`` counts records once).
        databases: the catalog databases to register the tables a batch writes in (silver
            tables with comments and properties from the schema, the quality results);
            None or an empty database: not registered.
        checker: a ``quality.checker.QualityChecker`` (validates every table of every batch) or None
            (no checks: the quality extra is not installed).
        quarantine_writer: writes the batch's quarantine rows instead of appending them to the
            quarantine table (replay updates the rows it re-decoded).
        replays: which batches an earlier run of the query may have written
            (:func:`lakehouse.checkpoints.replays_of`); default: any, so each append looks.
        driver_records: a batch of at most this many records is framed and decoded in the
            driver (``driver_pass``); 0: every batch takes the Spark path.
    """

    def __init__(
        self,
        spark: SparkSession,
        lakehouse_path: str,
        app_id: str,
        resolver: SchemaResolver,
        *,
        max_depth: int = 3,
        allow_unknown_fields: bool = False,
        native: bool = True,
        cache_bronze: bool = False,
        databases: CatalogDatabases | None = None,
        checker: Any = None,
        quarantine_writer: Callable[[DataFrame, int], None] | None = None,
        replays: Replays = ANY_BATCH_MAY_BE_REPLAYED,
        driver_records: int = DRIVER_RECORDS,
    ) -> None:
        self.spark = spark
        self.driver_records = driver_records
        # metrics (pipelines/metrics.py) set on_batch to see each batch
        self.on_batch: Callable[[BatchStats], None] | None = None
        self.layout = Layout(lakehouse_path)
        self.resolver = resolver
        self.max_depth = max_depth
        self.allow_unknown_fields = allow_unknown_fields
        self.native = native
        self.cache_bronze = cache_bronze
        self.checker = checker
        # the newest batches (tests and replay read them); the sums of all: ``totals``
        self.history: deque[BatchStats] = deque(maxlen=HISTORY_KEPT)
        self.totals = RunTotals()
        self._stamps: dict[str, int] = {}  # the plan's reads of ``writes.known_schema``
        self._lock = _DRIVER_LOCK
        self.evaluation = ExpressionEvaluation.for_session(spark)
        self.arrow_batches = ArrowBatches.for_session(spark)
        # a frame kept as a local checkpoint is computed by a job that also counts its failures
        self.keeps_as_leaf = keeps_as_leaf(str(spark.sparkContext.master))
        registration = SilverRegistration(
            spark, databases or CatalogDatabases("", "", "", ""), self._lock
        )
        self.writes = BatchWrites(
            spark,
            self.layout,
            app_id=app_id,
            replays=replays,
            lock=self._lock,
            registration=registration,
            checker=checker,
            quarantine_writer=quarantine_writer,
        )
        self.checks = BatchChecks(spark, checker, self.writes.quality_results)

    def __call__(self, bronze: DataFrame, batch_id: int) -> None:
        t0 = time.monotonic()
        stats = BatchStats(batch_id=int(batch_id))
        persisted: list[DataFrame] = []
        try:
            self._process(bronze, int(batch_id), stats, persisted)
        except BaseException:
            self.writes.forget_schemas()
            log.warning("silver: batch %d failed; its steps took %s s", batch_id, stats.steps)
            raise
        finally:
            self._release(persisted)
        stats.seconds = round(time.monotonic() - t0, 3)
        self.history.append(stats)
        self.totals.add(stats)
        if self.on_batch is not None:
            self.on_batch(stats)
        log.info(
            "silver: batch %d: %d records -> silver %s, quarantine %s (%.1f s)",
            batch_id,
            stats.records,
            stats.silver,
            stats.quarantined,
            stats.seconds,
        )

    @staticmethod
    def _release(persisted: list[DataFrame]) -> None:
        """Free every frame the batch kept; one that cannot be freed is logged, not raised
        (it would hide the batch's own outcome)."""
        for df in persisted:
            try:
                release(df)
            except Exception:  # noqa: BLE001 - the batch's result matters more than a leak
                log.warning("silver: could not free a kept frame", exc_info=True)

    def _process(
        self, bronze: DataFrame, batch_id: int, stats: BatchStats, persisted: list[DataFrame]
    ) -> None:
        processed_at = datetime.now(UTC)
        with stats.step("collect"):
            small = self._small(bronze)
        if small is None and self.cache_bronze:
            # read once: the keys pass and every decode pass below read the batch again
            columns = [*RECORD_COLUMNS, *([INGESTED_AT] if INGESTED_AT in bronze.columns else [])]
            bronze = bronze.select(*columns).persist(StorageLevel.MEMORY_AND_DISK)
            persisted.append(bronze)
        path: SmallBatch | LargeBatch
        with stats.step("frame"):
            if small is not None:
                self.arrow_batches.choose(bronze.sparkSession, None)  # it ships no records
                path = small
            else:
                path = self._large(*self._frame(bronze, persisted), persisted)
        counts, heads = path.counts, path.heads
        stats.records = counts.records
        if stats.records == 0:
            return
        self.evaluation.choose(bronze.sparkSession, stats.records)
        stats.schema_keys = len(counts.value_keys)
        with stats.step("resolve"):
            resolved = self._resolve(counts)
        with stats.step("plan"):
            plans = self._plan(resolved)
        checked = self.checker is not None and bool(plans)
        with stats.step("quarantine"):
            quarantine: list[Rejects] = [
                *path.rejects(bool(counts.bad_frames), resolved.faults, processed_at)
            ]
        with stats.step("decode"):
            tables = self._decode(path, plans, resolved, processed_at, quarantine)
        reference_time = batch_reference_time(heads, processed_at) if checked else None
        with stats.step("check"):
            to_write, results = self.checks(
                tables, path, batch_id, reference_time, processed_at, quarantine
            )
        with stats.step("write"):
            quarantined = self.writes(to_write, quarantine, results, batch_id, counts, persisted)
        stats.count_outcome(counts, [plan for plan, _ in to_write], quarantined)

    # -- the steps --------------------------------------------------------------------------

    def _small(self, bronze: DataFrame) -> SmallBatch | None:
        """A batch of at most ``driver_records`` records collected and framed in the driver
        (``driver_pass``); None: the Spark path (more records, Python framing)."""
        rows = collect_small(bronze, self.driver_records)
        return None if rows is None else SmallBatch.frame(bronze, rows)

    def _frame(
        self, bronze: DataFrame, persisted: list[DataFrame]
    ) -> tuple[KeyCounts, FramedBatch]:
        """(1) The distinct frame heads of values and keys with their counts, each read once
        on the driver, and the framed batch (read by the steps that need more than the decode
        pass). The heads are a handful of rows per schema version, except for keys that are
        binary ids starting with a magic byte: a row per distinct key (see ``framing``).

        One Spark job of one ``substring`` per record; only when some records need Python
        framing a second job frames those, kept for the steps that read them again.
        """
        heads = Heads.of_rows(head_counts(bronze))
        # before any of the batch's passes ships records to the Python workers
        self.arrow_batches.choose(bronze.sparkSession, heads.largest_record)
        if not heads.python:
            batch = FramedBatch(bronze, heads, lambda: heads.framed(bronze))
            return KeyCounts(heads.counts, heads.topics), batch
        python = python_framed(bronze, heads).persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(python)
        in_python = python.groupBy("_schema_key", "_key_schema_key", "topic").count().collect()
        counts = KeyCounts.of_rows(in_python, heads.counts, heads.topics)
        return counts, FramedBatch(bronze, heads, lambda: heads.framed(bronze).unionByName(python))

    def _large(
        self, counts: KeyCounts, framed: FramedBatch, persisted: list[DataFrame]
    ) -> LargeBatch:
        """The Spark path's batch (``spark_path``): its decode passes kept computed
        (``lakehouse.materialized``) and freed with the batch (``persisted``), counting their
        failures where keeping runs them."""
        return LargeBatch(framed, counts, partial(_kept, persisted), self.keeps_as_leaf)

    def _resolve(self, counts: KeyCounts) -> Resolved:
        """(2) Resolve each distinct schema key once (``RegistryUnavailable`` propagates)."""
        with self._lock:  # resolver calls from concurrent queries share one cache
            values = resolve_schema_keys(self.resolver, counts.value_keys)
            keys = resolve_schema_keys(self.resolver, counts.key_keys)
        return Resolved(values, keys)

    def _plan(self, resolved: Resolved) -> list[TablePlan]:
        """(3) One plan per message type: the table's schema after this batch, the conflicts;
        each plan stamped with what the driver knew of its table (``written_schemas``)."""
        self._stamps.clear()
        plans = plan_tables(
            resolved.values.values(), self.layout.silver_table, self._known_schema, self.max_depth
        )
        for plan in plans:
            plan.stamp = self._stamps.get(plan.path, -1)  # -1: none read, none kept after
        return plans

    def _known_schema(self, path: str) -> T.StructType | None:
        cached, self._stamps[path] = self.writes.known_schema(path)  # read before the log
        if cached is not None:
            return cached
        current = existing_schema(self.spark, path)
        return message_part(current) if current is not None else None

    def _decode(
        self,
        path: SmallBatch | LargeBatch,
        plans: list[TablePlan],
        resolved: Resolved,
        processed_at: datetime,
        quarantine: list[Rejects],
    ) -> list[tuple[TablePlan, Rows]]:
        """(5) Per table, its conflicts to quarantine, then each version decoded (in the driver
        for a small batch): the failures to quarantine, the others aligned to the table's
        schema; returns each table's rows (Arrow when decoded in the driver and no column needs
        Spark's alignment, ``arrow_rows``). A table whose records are known to have all failed
        is left out: nothing to check, no commit, no table created for nothing."""
        decoded_versions = self._decode_versions(path, plans, resolved.key_types)
        q_time = quarantine_time(processed_at)
        tables: list[tuple[TablePlan, Rows]] = []
        for plan in plans:
            quarantine.extend(path.conflicts(plan, processed_at))
            for res in plan.versions:
                decoded = decoded_versions[res.schema_key]
                if decoded.failures == 0:  # none counted: not known to be none
                    continue
                failures = path.decode_failures(decoded, res, plan.message_type, processed_at)
                quarantine.append(failures)
            if _all_failed(plan, decoded_versions, path.counts):
                continue
            rows = self._arrow_rows(plan, decoded_versions, processed_at)
            if rows is None:
                rows = union_all(
                    [
                        table_rows(decoded_versions[r.schema_key].rows, r, plan, q_time)
                        for r in plan.versions
                    ]
                )
            if rows is not None:
                tables.append((plan, rows))
        return tables

    def _arrow_rows(
        self, plan: TablePlan, decoded: dict[SchemaKey, DecodedVersion], processed_at: datetime
    ) -> pa.Table | None:
        """The table's rows as Arrow (``arrow_rows.table_rows``), when every version was
        decoded in the driver and none needs Spark's alignment; else None."""
        parts = []
        for res in plan.versions:
            arrow = decoded[res.schema_key].arrow
            rows = (
                None
                if arrow is None
                else arrow_table_rows(arrow, res, plan, processed_at, self.max_depth)
            )
            if rows is None:
                return None
            parts.append(rows)
        return union_rows(parts) if parts else None

    def _decode_versions(
        self,
        path: SmallBatch | LargeBatch,
        plans: list[TablePlan],
        key_types: dict[SchemaKey, tuple[bytes, str]],
    ) -> dict[SchemaKey, DecodedVersion]:
        """Each schema version the plans take, decoded: in the driver for a small batch
        (``driver_pass``), else by ``decode_pass.decode_all`` (several in one pass) and kept
        computed (``lakehouse.materialized``), as every outcome reads it; returns each
        version's rows, and how many of them failed when the pass counted them (a frame kept
        as a local checkpoint is computed by a job of its own, which counts)."""
        specs: dict[SchemaKey, DecodeSpec] = {}
        for plan in plans:
            for res in plan.versions:
                assert res.file_descriptor_set is not None
                specs[res.schema_key] = DecodeSpec(
                    file_descriptor_set=res.file_descriptor_set,
                    message_type=plan.message_type,
                    max_depth=self.max_depth,
                    allow_unknown_fields=self.allow_unknown_fields,
                    key_types=key_types,
                    native=self.native,
                )
        return path.decode(specs)


def _all_failed(
    plan: TablePlan, decoded: dict[SchemaKey, DecodedVersion], counts: KeyCounts
) -> bool:
    """Whether every record of the plan's versions is known to have failed to decode."""
    failures = [decoded[res.schema_key].failures for res in plan.versions]
    if any(f is None for f in failures):
        return False
    return sum(f for f in failures if f is not None) == counts.records_of(
        res.schema_key for res in plan.versions
    )


def _kept(persisted: list[DataFrame], decoded: DataFrame) -> DataFrame:
    """A decode pass kept computed (``lakehouse.materialized``), freed with the batch."""
    kept = materialize(decoded)
    persisted.append(kept)
    return kept
