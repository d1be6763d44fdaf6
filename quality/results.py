"""Quality results: one record per expectation per validated batch, kept in Delta.

Table :attr:`lakehouse.layout.Layout.quality_results` (schema :data:`RESULTS_SCHEMA`).
``expectation`` is the rule's id ``name(key=value, ...)`` (unique within a suite),
``expectation_type`` the bare GE name. ``rows_checked`` and ``rows_quarantined`` describe the
whole batch of the table and are repeated on each of its records, so a summary needs no second
table.

Writes are idempotent: :func:`write_results` replaces the records of ``(source, batch_id,
table)`` atomically (one Delta commit: an ``overwrite`` with a predicate), so a retried
micro-batch leaves exactly one record per ``(source, batch_id, table, expectation)``. A new
streaming checkpoint restarts batch ids at 0 and then replaces the older run's records of the
same batch id: the table holds the latest verdict per batch id, not a history of retries.

Writes cost milliseconds: a local results table (a plain path or ``file:`` URI) is written by
delta-rs (``deltalake``) in this process, with no Spark job (Spark's ``replaceWhere`` runs about
six jobs for a handful of rows: constraint check, snapshot state, the scan for rows to replace,
the write; seconds per batch on a busy machine). A table on an object store is written by
Spark's ``replaceWhere`` (Spark's file systems reach it). Both readers and writers share one Delta
log; a table written before the ``source`` column existed gets it first (Spark's ``ALTER TABLE``).

Writes are conflict-safe: the table is not partitioned, so Delta's conflict check cannot tell
that two streams' commits touch different rows and one of two concurrent
commits fails (``ConcurrentAppendException`` and kin; silver's processing-time mode runs one
query per bronze table, each writing results). Such a commit is retried, with a jittered
backoff (:func:`lakehouse.delta.retry_conflicts`): the write is idempotent, so a retry is the
same commit against the newer version.

:func:`summarize` aggregates in Spark and brings only one row per table and per failing
expectation to the driver. :func:`prune_results` deletes records older than a retention
(``quality.results_retention_days``, applied by silver at start-up); OPTIMIZE and VACUUM of the
table are ``protolake maintain --table-group quality``.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import (
    BooleanType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from lakehouse.delta import retry_conflicts
from lakehouse.layout import Layout, local_path
from lakehouse.tables import is_delta_table

log = logging.getLogger(__name__)

RESULTS_SCHEMA = StructType(
    [
        StructField("batch_id", LongType(), False),
        StructField("table", StringType(), False),
        StructField("message_type", StringType(), False),
        StructField("expectation", StringType(), False),
        StructField("expectation_type", StringType(), False),
        StructField("policy", StringType(), False),
        StructField("success", BooleanType(), False),
        StructField("element_count", LongType(), True),
        StructField("unexpected_count", LongType(), True),
        StructField("observed_value", StringType(), True),
        StructField("validated_at", TimestampType(), False),
        StructField("rows_checked", LongType(), True),
        StructField("rows_quarantined", LongType(), True),
        # The writer's stream (silver passes its checkpoint's app id): batch ids restart at 0
        # in every stream, so (batch_id, table) alone would let one stream replace another's.
        StructField("source", StringType(), True),
    ]
)


@dataclass(frozen=True)
class QualityResult:
    """The verdict of one expectation on one batch of one table."""

    batch_id: int
    table: str
    message_type: str
    expectation: str
    expectation_type: str
    policy: str
    success: bool
    element_count: int | None
    unexpected_count: int | None
    observed_value: str | None
    validated_at: datetime
    rows_checked: int | None
    rows_quarantined: int | None

    def as_row(self, source: str = "") -> tuple[Any, ...]:
        values = {**asdict(self), "source": source}
        return tuple(values[f.name] for f in RESULTS_SCHEMA.fields)


def write_results(
    spark: SparkSession,
    lakehouse_path: str,
    results: list[QualityResult],
    batch_id: int,
    source: str = "",
) -> int:
    """Replace the records of ``(source, batch_id)`` for the tables in ``results``.

    Returns the number of records written. ``source`` names the writing stream (silver: its
    checkpoint's app id), so streams whose batch ids coincide never replace each other's rows.

    Raises:
        ValueError: a result belongs to another batch id.
    """
    if not results:
        return 0
    others = sorted({r.batch_id for r in results} - {batch_id})
    if others:
        raise ValueError(f"write_results(batch_id={batch_id}) got results of batch ids {others}")
    tables = sorted({r.table for r in results})
    path = Layout(lakehouse_path).quality_results
    rows = [r.as_row(source) for r in results]
    local = local_path(path)
    what = f"quality results of batch {batch_id} ({source or 'no source'})"
    if local is None:  # an object store: Spark's file systems know how to reach it
        condition = (
            f"batch_id = {int(batch_id)} AND `table` IN ({', '.join(_sql_str(t) for t in tables)})"
            f" AND coalesce(source, '') = {_sql_str(source)}"
        )
        retry_conflicts(lambda: _replace_with_spark(spark, path, rows, condition), what, logger=log)
    else:
        predicate = (
            f'batch_id = {int(batch_id)} AND "table" IN ({", ".join(_df_str(t) for t in tables)})'
            f" AND coalesce(source, '') = {_df_str(source)}"
        )
        retry_conflicts(
            lambda: _replace_with_delta_rs(spark, str(local), rows, predicate), what, logger=log
        )
    return len(results)


def _replace_with_spark(
    spark: SparkSession, path: str, rows: list[tuple[Any, ...]], condition: str
) -> None:
    """One ``replaceWhere`` commit through Spark (about six Spark jobs)."""
    _add_source_column(spark, path)
    frame = spark.createDataFrame(rows, schema=RESULTS_SCHEMA)
    (
        frame.coalesce(1)
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", condition)
        .save(path)
    )


def _replace_with_delta_rs(
    spark: SparkSession, path: str, rows: list[tuple[Any, ...]], predicate: str
) -> None:
    """The same commit through delta-rs, in this process: no Spark job, milliseconds.

    A lost race with a concurrent commit raises delta-rs' ``CommitFailedError``, which
    :func:`lakehouse.delta.retry_conflicts` retries.
    """
    from deltalake import DeltaTable, write_deltalake
    from deltalake.exceptions import TableNotFoundError

    data = _arrow_table(rows)
    try:
        table = DeltaTable(path)
    except TableNotFoundError:
        write_deltalake(path, data, mode="append")
        return
    if "source" not in {f.name for f in table.schema().fields}:
        _add_source_column(spark, path)
        table = DeltaTable(path)
    write_deltalake(table, data, mode="overwrite", predicate=predicate)


def _arrow_table(rows: list[tuple[Any, ...]]) -> Any:
    """The result rows as an Arrow table of :data:`RESULTS_SCHEMA` (timestamps in UTC)."""
    import pyarrow as pa

    kinds = {
        "LongType": pa.int64(),
        "StringType": pa.string(),
        "BooleanType": pa.bool_(),
        "TimestampType": pa.timestamp("us", tz="UTC"),
    }
    schema = pa.schema(
        [
            pa.field(f.name, kinds[type(f.dataType).__name__], nullable=f.nullable)
            for f in RESULTS_SCHEMA.fields
        ]
    )
    columns = list(zip(*rows, strict=True))
    arrays = [
        pa.array([_utc(v) for v in column], type=field.type)
        for column, field in zip(columns, schema, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _utc(value: Any) -> Any:
    """A naive datetime is local time (as Spark's ``createDataFrame`` reads it), made UTC."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.astimezone(UTC)
    return value


def _add_source_column(spark: SparkSession, path: str) -> None:
    """Results tables written before the ``source`` column existed get it (null) in place."""
    if not is_delta_table(path, spark):
        return
    columns = spark.read.format("delta").load(path).columns
    if "source" not in columns:
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (source STRING)")


def summarize(spark: SparkSession, lakehouse_path: str) -> list[dict[str, Any]]:
    """Per table: batches, rows checked / passed / quarantined, and failures by expectation.

    Returns a list (sorted by table) of dicts::

        {"table", "message_type", "batches", "checked", "passed", "quarantined",
         "failed_batches",   # batches a `fail` expectation rejected
         "failed_by_expectation": {expectation: {"policy", "failed_batches", "unexpected_rows"}}}

    ``passed`` counts rows that stayed in silver from batches that were not rejected. A batch
    is one stream's micro-batch (``source``, ``batch_id``); batches with no row of the table
    are not counted. Empty list when nothing has been validated yet.
    """
    path = Layout(lakehouse_path).quality_results
    if not is_delta_table(path, spark):
        return []
    results = spark.read.format("delta").load(path)
    if "source" not in results.columns:  # written before the column existed
        results = results.withColumn("source", F.lit(None).cast("string"))
    failed = ~F.col("success")
    # A batch is one stream's (`source`) micro-batch: several silver streams (one per bronze
    # table) validate the same silver table under the same batch ids. Its counts are repeated
    # on each of its records.
    batches = results.groupBy("table", F.coalesce("source", F.lit("")), "batch_id").agg(
        F.max("message_type").alias("message_type"),
        F.coalesce(F.max("rows_checked"), F.lit(0)).alias("checked"),
        F.coalesce(F.max("rows_quarantined"), F.lit(0)).alias("quarantined"),
        F.max(failed & (F.col("policy") == "fail")).alias("rejected"),
    )
    # a stream whose batch held no record of this table checked nothing: not a batch of it
    counted = (F.col("checked") > 0) | F.col("rejected")
    kept = counted & ~F.col("rejected")

    def total(value: Column, when: Column) -> Column:
        return F.coalesce(F.sum(F.when(when, value)), F.lit(0))

    tables = batches.groupBy("table").agg(
        F.max("message_type").alias("message_type"),
        total(F.lit(1), counted).alias("batches"),
        total(F.col("checked"), counted).alias("checked"),
        total(F.col("checked") - F.col("quarantined"), kept).alias("passed"),
        total(F.col("quarantined"), kept).alias("quarantined"),
        total(F.lit(1), F.col("rejected")).alias("failed_batches"),
    )
    failures = (
        results.where(failed)
        .groupBy("table", "expectation")
        .agg(
            F.max("policy").alias("policy"),
            F.count(F.lit(1)).alias("failed_batches"),
            F.coalesce(F.sum("unexpected_count"), F.lit(0)).alias("unexpected_rows"),
        )
    )
    by_expectation: dict[str, dict[str, Any]] = {}
    for row in failures.collect():
        by_expectation.setdefault(row["table"], {})[row["expectation"]] = {
            "policy": row["policy"],
            "failed_batches": int(row["failed_batches"]),
            "unexpected_rows": int(row["unexpected_rows"]),
        }
    out = []
    for row in sorted(tables.collect(), key=lambda r: r["table"]):
        out.append(
            {
                "table": row["table"],
                "message_type": row["message_type"],
                "failed_by_expectation": dict(sorted(by_expectation.get(row["table"], {}).items())),
                **{
                    k: int(row[k])
                    for k in ("batches", "checked", "passed", "quarantined", "failed_batches")
                },
            }
        )
    return out


def prune_results(spark: SparkSession, lakehouse_path: str, older_than: datetime) -> int:
    """Delete the records validated before ``older_than``; returns how many were deleted.

    A no-op (0) when the results table does not exist yet.
    """
    path = Layout(lakehouse_path).quality_results
    if not is_delta_table(path, spark):
        return 0
    from delta.tables import DeltaTable

    condition = F.col("validated_at") < F.lit(older_than).cast("timestamp")
    doomed = spark.read.format("delta").load(path).where(condition).count()
    if doomed:
        retry_conflicts(
            lambda: DeltaTable.forPath(spark, path).delete(condition),
            f"deleting results before {older_than.isoformat()}",
            logger=log,
        )
    return int(doomed)


def format_observed(result: dict[str, Any]) -> str | None:
    """GE's observed value, else a sample of unexpected values, as a short string."""
    if "observed_value" in result:
        return _json(result["observed_value"])
    if result.get("unexpected_count"):
        sample = (result.get("partial_unexpected_list") or [])[:5]
        return f"unexpected e.g. {_json(sample)}"
    return None


def _json(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    try:
        return json.dumps(value, default=str, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def _sql_str(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _df_str(value: str) -> str:
    """A SQL string literal for delta-rs (DataFusion: a quote is doubled, backslash is plain)."""
    return "'" + value.replace("'", "''") + "'"
