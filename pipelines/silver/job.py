"""The silver job: bronze Delta -> one Delta table per message type + quarantine.

One Structured Streaming query per bronze table (every table under ``<lakehouse>/bronze``,
or the ones given), each with its own checkpoint ``<lakehouse>/_checkpoints/silver/<table>``
and its own idempotent-write app id (a UUID kept inside that checkpoint folder: a new
checkpoint means a new app id). Triggers: ``available-now`` (queries run one after the
other, each until its bronze table is drained) and ``processing-time`` (all run together
until stopped).

Each micro-batch runs in ONE ``foreachBatch`` (:class:`SilverBatch`):

1. framing on the executors (``framing.schema_keys``): only the distinct schema keys and
   their counts come back;
2. the distinct schema keys are resolved on the driver, once each (``resolution``);
   ``RegistryUnavailable`` fails the batch (Spark retries it when the query restarts;
   nothing is quarantined for an outage);
3. per message type and schema version, framing again and decoding on the executors in one
   pass (``decode.decode_bronze``); the framed batch with its raw bytes
   (``framing.frame_records``) is computed only when there are quarantine rows to take from
   it (bad frames, failed resolutions, schema conflicts, quality checks);
4. schema evolution per table (``tables``): compatible versions are merged, others go to
   quarantine with ``SCHEMA_CONFLICT``;
5. quality checks on every table (``quality``: the default suite of every silver table plus the
   configured expectations of its message type, one validation per table per batch): failed
   rows go to quarantine (``DQ_FAILED``); a ``fail`` policy fails the batch before any write;
6. writes: every silver table, then the quarantine, each with ``txnAppId``/``txnVersion``.

A batch that fails after some of its writes committed is run again with the same batch id and
the same bronze rows (Spark's offset log), and Delta skips the writes already committed. That
is only safe because every step decides the same way on a retry: in particular the quality
rules' "now" is the batch's reference time, the latest ``_ingested_at`` of its bronze rows
(:func:`batch_reference_time`), never the wall clock. With the wall clock, a record quarantined
on the first attempt (silver appended without it, then a crash before the quarantine append)
could pass on the retry and go into a silver append Delta skips: lost.

Every bronze record ends in exactly one silver table or in quarantine
(:func:`pipelines.quarantine.check_invariant` checks it).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - pyspark's usual alias
from pyspark.sql import types as T  # noqa: N812
from pyspark.sql.streaming import StreamingQuery

from codec import SchemaResolver
from pipelines.settings import TRIGGERS, ConfigError, ProtolakeConfig, load_config
from pipelines.naming import table_name_for
from pipelines.quality_retention import prune_quality_results
from pipelines.quarantine import (
    list_delta_tables,
    quarantine_path,
    to_quarantine_rows,
)
from pipelines.spark import build_session

from .decode import ERROR_COLUMNS, DecodeSpec, decode_bronze, message_spark_schema
from .framing import BRONZE_COLUMNS, frame_records, schema_keys
from .resolution import Resolution, resolve_schema_keys
from .tables import (
    LINEAGE_FIELDS,
    align_to,
    append_idempotent,
    ensure_table,
    existing_schema,
    message_part,
    register_table,
    register_tables,
    union_all,
)

log = logging.getLogger("pipelines.silver")
# Table creation, catalog registration and resolver calls of concurrent queries (processing-time
# runs one query per bronze table in driver threads) go one at a time.
_DRIVER_LOCK = threading.RLock()
JOB = "silver"
SCHEMA_CONFLICT = "SCHEMA_CONFLICT"
INGESTED_AT = "_ingested_at"  # bronze's column: when bronze wrote the row


def silver_root(lakehouse_path: str) -> str:
    return f"{lakehouse_path.rstrip('/')}/silver"


def silver_checkpoint(lakehouse_path: str, bronze_table: str) -> str:
    """``<lakehouse>/_checkpoints/silver/<bronze table>``."""
    return f"{lakehouse_path.rstrip('/')}/_checkpoints/{JOB}/{bronze_table}"


def open_resolver(cfg: ProtolakeConfig) -> SchemaResolver:
    """A schema resolver on the configured registry (HTTP(S) URL or ``dir:`` folder)."""
    from codec import open_registry

    r = cfg.registry
    if not r.url.startswith(("http://", "https://")):
        return SchemaResolver(open_registry(r.url))
    kwargs: dict[str, Any] = {
        "connect_timeout": r.timeout_seconds,
        "read_timeout": r.timeout_seconds,
        "max_retries": r.max_retries,
    }
    if r.basic_auth:
        kwargs["basic_auth"] = r.basic_auth
    if r.bearer_token:
        kwargs["bearer_token"] = r.bearer_token
    if r.ca_bundle:
        kwargs["ca_bundle"] = r.ca_bundle
    if r.client_cert:
        kwargs["client_cert"] = (r.client_cert, r.client_key) if r.client_key else r.client_cert
    return SchemaResolver(open_registry(r.url, **kwargs))


@dataclass
class BatchStats:
    """What one micro-batch did (kept for the summary and for tests)."""

    batch_id: int
    records: int = 0
    silver: dict[str, int] = field(default_factory=dict)
    quarantined: dict[str, int] = field(default_factory=dict)
    schema_keys: int = 0
    seconds: float = 0.0


@dataclass
class _TablePlan:
    message_type: str
    table: str
    path: str
    merged: T.StructType | None  # message columns of the table after this batch
    versions: list[Resolution]
    conflicts: list[tuple[Resolution, str]]


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
        cache_bronze: keep the micro-batch's bronze rows in executor memory for the passes
            over it (``silver.cache_bronze``). Off (the default), each pass reads them again:
            faster when that read is cheap (local disk: ``bench/silver_bench.py``), and
            Spark's ``numInputRows`` counts every pass (protolake's metrics count records
            once, see ``pipelines.metrics``). On: one read, one cache.
        database: catalog database to register tables in ("" = do not register).
        checker: a ``quality.QualityChecker`` (validates every table of every batch) or None
            (no checks: the quality extra is not installed).
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
        database: str = "",
        checker: Any = None,
        quarantine_writer: Callable[[DataFrame, int], None] | None = None,
    ) -> None:
        self.spark = spark
        # replay (pipelines/ops/replay.py) updates the quarantine rows it re-decoded instead of
        # appending new ones; metrics (pipelines/metrics.py) set on_batch to see each batch
        self.quarantine_writer = quarantine_writer
        self.on_batch: Callable[[BatchStats], None] | None = None
        self.root = lakehouse_path.rstrip("/")
        self.app_id = app_id
        self.resolver = resolver
        self.max_depth = max_depth
        self.allow_unknown_fields = allow_unknown_fields
        self.native = native
        self.cache_bronze = cache_bronze
        self.database = database
        self.checker = checker
        self.history: list[BatchStats] = []
        self._registered: set[str] = set()
        # message columns of each table as this query last wrote it: saves reading the Delta
        # log every batch; dropped when a batch fails (another writer may have changed it)
        self._schemas: dict[str, T.StructType] = {}
        self._lock = _DRIVER_LOCK

    def __call__(self, bronze: DataFrame, batch_id: int) -> None:
        t0 = time.monotonic()
        stats = BatchStats(batch_id=int(batch_id))
        persisted: list[DataFrame] = []
        try:
            self._process(bronze, int(batch_id), stats, persisted)
        except BaseException:
            self._schemas.clear()
            raise
        finally:
            for df in persisted:
                df.unpersist()
        stats.seconds = round(time.monotonic() - t0, 3)
        self.history.append(stats)
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

    # -- the steps --------------------------------------------------------------------------

    def _process(
        self, bronze: DataFrame, batch_id: int, stats: BatchStats, persisted: list[DataFrame]
    ) -> None:
        processed_at = datetime.now(UTC)
        if self.cache_bronze:
            # read once: the keys pass and every decode pass below read the batch again
            columns = [*BRONZE_COLUMNS, *([INGESTED_AT] if INGESTED_AT in bronze.columns else [])]
            bronze = bronze.select(*columns).persist(StorageLevel.MEMORY_AND_DISK)
            persisted.append(bronze)
        # (2) distinct schema keys of values and keys, with their counts: a handful of rows
        # to the driver, whatever the number of records (one Spark job; only key, value and
        # headers go to the Python workers)
        key_rows = schema_keys(bronze).groupBy("_schema_key", "_key_schema_key").count().collect()
        stats.records = sum(int(r["count"]) for r in key_rows)
        if stats.records == 0:
            return
        value_keys = sorted({r["_schema_key"] for r in key_rows if r["_schema_key"]})
        key_keys = sorted({r["_key_schema_key"] for r in key_rows if r["_key_schema_key"]})
        stats.schema_keys = len(value_keys)
        with self._lock:  # resolver calls from concurrent queries share one cache
            resolutions = resolve_schema_keys(self.resolver, value_keys)
            key_resolutions = resolve_schema_keys(self.resolver, key_keys)
        key_types = {
            k: (r.file_descriptor_set, r.message_type)
            for k, r in key_resolutions.items()
            if r.ok and r.file_descriptor_set is not None and r.message_type is not None
        }
        bad = [r for r in resolutions.values() if not r.ok]
        by_type: dict[str, list[Resolution]] = defaultdict(list)
        for r in resolutions.values():
            if r.ok and r.message_type is not None:
                by_type[r.message_type].append(r)
        plans = {
            message_type: self._plan_table(message_type, by_type[message_type])
            for message_type in sorted(by_type)
        }
        bad_frames = any(r["_schema_key"] is None for r in key_rows)
        checked = self.checker is not None and bool(plans)

        # (1) the framed batch (raw bytes beside the framing columns) feeds the quarantine rows
        # of bad frames, failed resolutions, schema conflicts and quality failures; decoding
        # frames on its own (decode_bronze). So it is computed, once, only when this batch can
        # have such rows.
        framed = frame_records(bronze)
        if bad_frames or bad or checked or any(p.conflicts for p in plans.values()):
            framed = framed.persist(StorageLevel.MEMORY_AND_DISK)
            persisted.append(framed)

        quarantine_parts: list[DataFrame] = []
        q_time = F.lit(processed_at).cast("timestamp")

        # (1) bad framing
        if bad_frames:
            quarantine_parts.append(
                self._quarantine_framed(
                    framed.where(F.col("_frame_code").isNotNull()),
                    "_frame_code",
                    "_frame_stage",
                    "_frame_reason",
                    q_time,
                )
            )
        # (2) record faults of resolution
        if bad:
            faults = self.spark.createDataFrame(
                [(r.schema_key, r.code, r.stage, r.reason) for r in bad],
                "_schema_key string, _res_code string, _res_stage string, _res_reason string",
            )
            quarantine_parts.append(
                self._quarantine_framed(
                    framed.join(F.broadcast(faults), "_schema_key", "inner"),
                    "_res_code",
                    "_res_stage",
                    "_res_reason",
                    q_time,
                )
            )

        # (3)+(4) per message type: the table schema planned above, decode each version
        table_frames: list[tuple[_TablePlan, DataFrame]] = []
        for message_type, plan in plans.items():
            for res, reason in plan.conflicts:
                quarantine_parts.append(
                    self._quarantine_framed(
                        framed.where(F.col("_schema_key") == res.schema_key),
                        F.lit(SCHEMA_CONFLICT),
                        F.lit("schema"),
                        F.lit(reason),
                        q_time,
                        message_type=F.lit(message_type),
                    )
                )
            good_parts: list[DataFrame] = []
            for res in plan.versions:
                assert res.file_descriptor_set is not None and plan.merged is not None
                spec = DecodeSpec(
                    file_descriptor_set=res.file_descriptor_set,
                    message_type=message_type,
                    max_depth=self.max_depth,
                    allow_unknown_fields=self.allow_unknown_fields,
                    key_types=key_types,
                    native=self.native,
                )
                msg_schema = message_spark_schema(
                    res.file_descriptor_set, message_type, self.max_depth
                )
                decoded = decode_bronze(bronze, res.schema_key, spec, msg_schema).persist(
                    StorageLevel.MEMORY_AND_DISK
                )
                persisted.append(decoded)
                failed = decoded.where(F.col("_decode_code").isNotNull())
                quarantine_parts.append(
                    to_quarantine_rows(
                        failed,
                        key="_key",
                        value="_value",
                        headers="_headers",
                        topic="_kafka_topic",
                        partition="_kafka_partition",
                        offset="_kafka_offset",
                        timestamp="_kafka_timestamp",
                        reason_code="_decode_code",
                        stage="_decode_stage",
                        reason="_decode_reason",
                        schema_id=F.lit(res.schema_id),
                        schema_guid=F.lit(res.schema_guid),
                        message_indexes=F.array(*[F.lit(i) for i in res.message_indexes]),
                        message_type=F.lit(message_type),
                        quarantined_at=q_time,
                    )
                )
                rows = (
                    decoded.where(F.col("_decode_code").isNull())
                    .drop(*ERROR_COLUMNS)
                    .withColumn("_schema_id", F.lit(res.schema_id).cast("long"))
                    .withColumn("_schema_guid", F.lit(res.schema_guid).cast("string"))
                    .withColumn("_message_type", F.lit(message_type))
                    .withColumn("_processed_at", q_time)
                )
                good_parts.append(align_to(rows, _table_schema(plan.merged)))
            table_df = union_all(good_parts)
            if table_df is not None:
                table_frames.append((plan, table_df))

        # (5) quality, before anything is written
        to_write: list[tuple[_TablePlan, DataFrame]] = []
        quality_results: list[Any] = []
        failed_outcome: Any = None
        reference_time = batch_reference_time(bronze, processed_at) if checked else None
        for plan, table_df in table_frames:
            if self.checker is not None:
                outcome = self.checker.validate(
                    table_df,
                    message_type=plan.message_type,
                    table=plan.table,
                    batch_id=batch_id,
                    reference_time=reference_time,
                )
                quality_results.extend(outcome.results)
                if outcome.fail_batch and failed_outcome is None:
                    failed_outcome = outcome
                to_write.append((plan, outcome.passed))
                if outcome.rows_quarantined:
                    quarantine_parts.append(
                        self._quarantine_dq(outcome.failed, framed, plan, q_time)
                    )
            else:
                to_write.append((plan, table_df))
        if failed_outcome is not None:
            from quality import QualityFailed

            self.checker.write_results(quality_results, batch_id, source=self.app_id)
            raise QualityFailed(failed_outcome)

        # (6) writes: silver tables, then quarantine; each skipped when already committed
        for plan, df in to_write:
            assert plan.merged is not None
            if plan.path not in self._schemas:
                with self._lock:
                    ensure_table(
                        self.spark, plan.path, _table_schema(plan.merged), plan.message_type
                    )
            append_idempotent(df, plan.path, self.app_id, batch_id, merge_schema=True)
            self._schemas[plan.path] = plan.merged
            self._register(plan)
        quarantine = union_all(quarantine_parts)
        assert quarantine is not None
        if self.quarantine_writer is not None:
            self.quarantine_writer(quarantine, batch_id)
        else:
            append_idempotent(quarantine, quarantine_path(self.root), self.app_id, batch_id)
        if quality_results:
            self.checker.write_results(quality_results, batch_id, source=self.app_id)
        # counts for the summary: one small job over the persisted frames (no re-decoding)
        per_key: dict[str, int] = defaultdict(int)
        for kr in key_rows:
            if kr["_schema_key"]:
                per_key[kr["_schema_key"]] += int(kr["count"])
        lost: dict[str, int] = defaultdict(int)
        for row in quarantine.groupBy("reason_code", "_message_type").count().collect():
            stats.quarantined[row["reason_code"]] = stats.quarantined.get(
                row["reason_code"], 0
            ) + int(row["count"])
            if row["_message_type"] is not None:
                lost[row["_message_type"]] += int(row["count"])
        for plan, _ in to_write:
            arrived = sum(
                per_key.get(r.schema_key, 0) for r in plan.versions + [c for c, _ in plan.conflicts]
            )
            stats.silver[plan.table] = arrived - lost.get(plan.message_type, 0)

    def _plan_table(self, message_type: str, versions: list[Resolution]) -> _TablePlan:
        from pipelines.proto_types import schemas_compatible

        table = table_name_for(message_type)
        path = f"{silver_root(self.root)}/{table}"
        merged = self._schemas.get(path)
        if merged is None:
            current = existing_schema(self.spark, path)
            merged = message_part(current) if current is not None else None
        plan = _TablePlan(message_type, table, path, merged, [], [])
        for res in sorted(versions, key=_version_order):
            assert res.file_descriptor_set is not None
            schema = message_spark_schema(res.file_descriptor_set, message_type, self.max_depth)
            if plan.merged is None:
                plan.merged = schema
                plan.versions.append(res)
                continue
            new, reason = schemas_compatible(plan.merged, schema)
            if new is None:
                plan.conflicts.append(
                    (
                        res,
                        f"schema {res.version} of {message_type} cannot be merged into {table}: {reason}",
                    )
                )
            else:
                plan.merged = new
                plan.versions.append(res)
        return plan

    def _quarantine_framed(
        self,
        df: DataFrame,
        code: Any,
        stage: Any,
        reason: Any,
        q_time: Any,
        message_type: Any = None,
    ) -> DataFrame:
        return to_quarantine_rows(
            df,
            key="key",
            value="value",
            headers="headers",
            topic="topic",
            partition="partition",
            offset="offset",
            timestamp="timestamp",
            reason_code=code,
            stage=stage,
            reason=reason,
            schema_id="_schema_id",
            schema_guid="_schema_guid",
            message_indexes="_message_indexes",
            message_type=message_type,
            quarantined_at=q_time,
        )

    def _quarantine_dq(
        self, failed: DataFrame, framed: DataFrame, plan: _TablePlan, q_time: Any
    ) -> DataFrame:
        """Rows a quality rule rejected, with their raw bytes from the framed batch."""
        ids = failed.select(
            F.col("_kafka_topic").alias("topic"),
            F.col("_kafka_partition").alias("partition"),
            F.col("_kafka_offset").alias("offset"),
            F.col("reason_code").alias("_dq_code"),
            F.col("stage").alias("_dq_stage"),
            F.col("reason").alias("_dq_reason"),
        )
        joined = framed.join(ids, ["topic", "partition", "offset"], "inner")
        return self._quarantine_framed(
            joined,
            "_dq_code",
            "_dq_stage",
            "_dq_reason",
            q_time,
            message_type=F.lit(plan.message_type),
        )

    def _register(self, plan: _TablePlan) -> None:
        if not self.database or plan.table in self._registered:
            return
        with self._lock:
            register_table(self.spark, self.database, plan.table, plan.path)
            self._registered.add(plan.table)


def batch_reference_time(bronze: DataFrame, default: datetime) -> datetime:
    """A micro-batch's "now" for the quality rules: the latest ``_ingested_at`` of its rows.

    Stable across attempts: a retried batch reads the same bronze rows, whose ``_ingested_at``
    bronze wrote once (see the module docstring for why the wall clock would lose records).
    ``default`` when the rows have no ``_ingested_at`` column or only nulls.
    """
    if INGESTED_AT not in bronze.columns:
        return default
    row = bronze.agg(F.max(INGESTED_AT)).first()
    latest = row[0] if row is not None else None
    if latest is None:
        return default
    # Spark gives a naive datetime in this process's local time; make it an instant
    return latest.astimezone(UTC) if isinstance(latest, datetime) else default


def _table_schema(message: T.StructType) -> T.StructType:
    return T.StructType([*message.fields, *LINEAGE_FIELDS])


def _version_order(res: Resolution) -> tuple[int, int, str]:
    if res.schema_id is not None:
        return (0, res.schema_id, "")
    return (1, 0, res.schema_guid or "")


# -- the streaming queries -----------------------------------------------------------------


def bronze_tables(
    lakehouse_path: str, spark: SparkSession, names: Sequence[str] | None = None
) -> list[str]:
    """Bronze table paths to read: the named ones, or every Delta table under bronze/."""
    root = f"{lakehouse_path.rstrip('/')}/bronze"
    if names:
        return [f"{root}/{n}" for n in names]
    return list_delta_tables(spark, root)


def start_query(
    spark: SparkSession,
    cfg: ProtolakeConfig,
    bronze_path: str,
    trigger: str,
    resolver: SchemaResolver,
    checker: Any = None,
) -> tuple[StreamingQuery, SilverBatch]:
    """Start the silver query of one bronze table."""
    from pipelines.bronze import load_app_id

    name = bronze_path.rstrip("/").rsplit("/", 1)[-1]
    checkpoint = silver_checkpoint(cfg.lakehouse_path, name)
    batch = SilverBatch(
        spark,
        cfg.lakehouse_path,
        load_app_id(spark, checkpoint),
        resolver,
        max_depth=cfg.silver.max_recursion_depth,
        allow_unknown_fields=cfg.silver.keep_unknown_fields,
        native=cfg.silver.native_decoder,
        cache_bronze=cfg.silver.cache_bronze,
        database=cfg.silver.catalog_database,
        checker=checker,
    )
    from pipelines.metrics import silver_batch_hook

    batch.on_batch = silver_batch_hook(f"silver_{name}")
    writer = (
        spark.readStream.format("delta")
        .load(bronze_path)
        .writeStream.queryName(f"silver_{name}")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(batch)
    )
    if trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    elif trigger == "processing-time":
        writer = writer.trigger(processingTime=cfg.silver.processing_interval)
    else:
        raise ConfigError(f"trigger: must be one of {', '.join(TRIGGERS)}, got {trigger!r}")
    log.info(
        "silver: %s -> %s (checkpoint %s, %s)",
        bronze_path,
        silver_root(cfg.lakehouse_path),
        checkpoint,
        trigger,
    )
    return writer.start(), batch


@dataclass
class SilverRun:
    """The queries of one run and their batch functions (for summaries and tests)."""

    queries: list[StreamingQuery] = field(default_factory=list)
    batches: list[SilverBatch] = field(default_factory=list)


def make_checker(spark: SparkSession, cfg: ProtolakeConfig) -> Any:
    """The quality checker (a ``quality.QualityChecker``).

    The checker validates every silver table, configured expectations or not (the default suite:
    lineage not null, Kafka coordinates unique, Kafka timestamps within bounds). None only when
    the quality extra (Great Expectations) is not installed and no expectation is configured;
    configured expectations without it are a :class:`ConfigError`.
    """
    import importlib.util

    if importlib.util.find_spec("great_expectations") is None:
        if cfg.quality.expectations:
            raise ConfigError(
                "quality.expectations: Great Expectations is not installed "
                "(pip install protolake[quality])"
            )
        log.warning(
            "silver: Great Expectations is not installed (protolake[quality]): "
            "the silver tables are NOT checked"
        )
        return None
    from quality import QualityChecker, QualityConfigError, parse_rules

    try:
        rules = parse_rules(cfg.quality.expectations)
        checker = QualityChecker(spark, cfg.lakehouse_path, rules)
    except QualityConfigError as exc:
        raise ConfigError(str(exc)) from exc
    return checker


def run(
    cfg: ProtolakeConfig,
    trigger: str | None = None,
    *,
    spark: SparkSession | None = None,
    bronze_table_names: Sequence[str] | None = None,
    await_termination: bool = True,
    resolver: SchemaResolver | None = None,
) -> SilverRun:
    """Run silver over the bronze tables.

    Args:
        cfg: the configuration.
        trigger: overrides ``silver.trigger``.
        spark: a session (default: :func:`pipelines.spark.build_session`).
        bronze_table_names: bronze tables to read (default: all under ``<lakehouse>/bronze``).
        await_termination: wait for the queries (available-now: until drained, one query
            after the other; processing-time: until stopped). With False, available-now
            queries are still started together and returned running.
        resolver: a schema resolver to use (default: :func:`open_resolver`).

    Raises:
        pyspark.errors.StreamingQueryException: a batch failed (e.g. the registry is down).
    """
    from pipelines.bronze import await_queries

    trigger = trigger or cfg.silver.trigger
    if trigger not in TRIGGERS:
        raise ConfigError(f"trigger: must be one of {', '.join(TRIGGERS)}, got {trigger!r}")
    if spark is None:
        spark = build_session(
            "protolake-silver", master=cfg.spark.master or None, conf=cfg.spark.conf
        )
    resolver = resolver or open_resolver(cfg)
    from pipelines.metrics import install_metrics

    install_metrics(spark, cfg)
    checker = make_checker(spark, cfg)
    if checker is not None:
        prune_quality_results(spark, cfg)
    if cfg.silver.catalog_database:
        # the catalog of this session may be new (in-memory, or another metastore): make every
        # existing table selectable by name, not only those this run writes to
        register_tables(spark, cfg.lakehouse_path, cfg.silver.catalog_database)
    out = SilverRun()
    paths = bronze_tables(cfg.lakehouse_path, spark, bronze_table_names)
    if not paths:
        log.warning("silver: no bronze table under %s/bronze yet", cfg.lakehouse_path)
        return out
    sequential = trigger == "available-now" and await_termination
    for path in paths:
        query, batch = start_query(spark, cfg, path, trigger, resolver, checker)
        out.queries.append(query)
        out.batches.append(batch)
        if sequential:
            await_queries([query])
    if await_termination and not sequential:
        await_queries(out.queries)
    if checker is not None and await_termination:
        checker.build_data_docs()
    return out


def summarize(result: SilverRun, cfg: ProtolakeConfig) -> dict[str, Any]:
    """Records, silver rows per table and quarantined rows per reason over a run."""
    silver: dict[str, int] = defaultdict(int)
    quarantined: dict[str, int] = defaultdict(int)
    records = batches = 0
    for b in result.batches:
        for s in b.history:
            batches += 1
            records += s.records
            for k, v in s.quarantined.items():
                quarantined[k] += v
            for k in s.silver:
                silver[k] += 0
    return {
        "job": JOB,
        "batches": batches,
        "records": records,
        "quarantined": dict(sorted(quarantined.items())),
        "tables": sorted(silver),
        "silver_root": silver_root(cfg.lakehouse_path),
    }


# --- command line (protolake silver; see pipelines/cli.py) ---------------------------------


def add_parser(subparsers: Any) -> None:
    """Register ``protolake silver`` (cli.py adds --config, --trigger, --json, -v)."""
    parser = subparsers.add_parser(
        "silver",
        help="decode bronze into silver tables per message type + quarantine",
        description="Decode bronze records into one Delta table per message type; "
        "undecodable records go to the quarantine table.",
    )
    parser.add_argument(
        "--bronze-table",
        action="append",
        default=None,
        metavar="NAME",
        help="bronze table to read (repeatable; default: every table under <lakehouse>/bronze)",
    )
    parser.set_defaults(func=run_from_args)


def run_from_args(args: argparse.Namespace) -> int:
    """``protolake silver``: load the configuration, run, print a summary."""
    from pipelines.bronze import await_queries, stop_on_signals

    cfg = load_config(args.config)
    t0 = time.monotonic()
    trigger = args.trigger or cfg.silver.trigger
    result = run(
        cfg,
        trigger=trigger,
        bronze_table_names=args.bronze_table,
        await_termination=trigger == "available-now",
    )
    if trigger == "processing-time":
        stop_on_signals(result.queries)
        await_queries(result.queries)
    summary = summarize(result, cfg) | {"seconds": round(time.monotonic() - t0, 3)}
    _print_summary(summary, as_json=bool(getattr(args, "json", False)))
    return 0


def _print_summary(
    summary: dict[str, Any], as_json: bool, out: Callable[[str], Any] = print
) -> None:
    if as_json:
        out(json.dumps(summary, sort_keys=True))
        return
    out(
        f"silver: {summary['records']} records in {summary['batches']} batches "
        f"({summary['seconds']} s) -> {len(summary['tables'])} tables under {summary['silver_root']}; "
        f"quarantined {summary['quarantined']}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pipelines.silver --config FILE``: the same as ``protolake silver``."""
    from pipelines.cli import main as cli_main

    return cli_main(["silver", *(sys.argv[1:] if argv is None else argv)])
