"""The quarantine table and the invariant that nothing is lost.

The quarantine table (Delta, ``lakehouse.layout.Layout.quarantine``) holds every bronze record
that could not land in silver, with its raw bytes and a stable reason. Schema (docs/contracts.md), in this order:
:data:`QUARANTINE_SCHEMA`.

- ``reason_code``: the codec's codes (EMPTY_VALUE ... UNKNOWN_FIELDS), ``SCHEMA_CONFLICT``
  (a schema version whose change cannot be widened into the table), ``DQ_FAILED``.
- ``stage``: framing | registry | schema | payload | quality.
- ``replayed_at`` / ``replay_outcome``: null when written; ``protolake replay`` sets them.
  A row whose ``replay_outcome`` is :data:`REPLAYED` has moved to silver and no longer counts
  as quarantined; any other outcome (a new reason code) leaves it quarantined
  (:func:`still_quarantined`; the rule itself is ``pipelines.quarantine_state``).

The invariant (:func:`check_invariant`): every bronze ``(topic, partition, offset)`` is in
exactly one silver table or (active) in quarantine: never both, never twice, never missing,
and nothing is in silver or quarantine that bronze does not have.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql import types as T  # noqa: N812

from lakehouse import sql_text
from lakehouse.driver_tables import create_table
from lakehouse.layout import Layout, table_name
from lakehouse.tables import is_delta_table, list_delta_tables
from pipelines.quarantine_state import OUTCOME_COLUMN, REPLAYED

HEADERS_TYPE = T.ArrayType(
    T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])
)

QUARANTINE_SCHEMA = T.StructType(
    [
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField("headers", HEADERS_TYPE),
        T.StructField("_kafka_topic", T.StringType()),
        T.StructField("_kafka_partition", T.IntegerType()),
        T.StructField("_kafka_offset", T.LongType()),
        T.StructField("_kafka_timestamp", T.TimestampType()),
        T.StructField("reason_code", T.StringType()),
        T.StructField("stage", T.StringType()),
        T.StructField("reason", T.StringType()),
        T.StructField("_schema_id", T.LongType()),
        T.StructField("_schema_guid", T.StringType()),
        T.StructField("message_indexes", T.ArrayType(T.IntegerType())),
        T.StructField("_message_type", T.StringType()),
        T.StructField("_quarantined_at", T.TimestampType()),
        T.StructField("replayed_at", T.TimestampType()),
        T.StructField("replay_outcome", T.StringType()),
    ]
)

RECORD_KEY = ("_kafka_topic", "_kafka_partition", "_kafka_offset")


def still_quarantined() -> Column:
    """Rows that still count as quarantined (not replayed into silver).

    The Spark twin of :func:`pipelines.quarantine_state.counts_as_quarantined`: a null
    ``replay_outcome`` or a failure reason is true, :data:`REPLAYED` is false.
    """
    return ~F.col(OUTCOME_COLUMN).eqNullSafe(F.lit(REPLAYED))


def to_quarantine_rows(
    df: DataFrame,
    *,
    key: Column | str,
    value: Column | str,
    headers: Column | str,
    topic: Column | str,
    partition: Column | str,
    offset: Column | str,
    timestamp: Column | str,
    reason_code: Column | str,
    stage: Column | str,
    reason: Column | str,
    schema_id: Column | str | None = None,
    schema_guid: Column | str | None = None,
    message_indexes: Column | str | None = None,
    message_type: Column | str | None = None,
    quarantined_at: Column | None = None,
) -> DataFrame:
    """Project any DataFrame onto :data:`QUARANTINE_SCHEMA` (a pure transform).

    Each argument is a column name, a Column of ``df`` or SQL text
    (``lakehouse.sql_text.SqlText``: cheaper to build than a Column); None means null.
    """
    exprs = [
        key,
        value,
        headers,
        topic,
        partition,
        offset,
        timestamp,
        reason_code,
        stage,
        reason,
        schema_id,
        schema_guid,
        message_indexes,
        message_type,
        quarantined_at if quarantined_at is not None else _NOW,
        None,
        None,
    ]
    return df.select(
        *[_cast_to(e, f) for e, f in zip(exprs, QUARANTINE_SCHEMA.fields, strict=True)]
    )


_NOW = sql_text.SqlText("current_timestamp()")


def _cast_to(expr: Column | str | None, field: T.StructField) -> Column:
    """``expr`` (a Column, a column name, ``lakehouse.sql_text.SqlText``, None: null) cast to the
    field's type and named after it; names and nulls as SQL text (``lakehouse.sql_text``)."""
    if isinstance(expr, Column):
        return expr.cast(field.dataType).alias(field.name)
    if expr is None:
        source = "NULL"
    else:
        source = expr if isinstance(expr, sql_text.SqlText) else sql_text.quoted(expr)
    text = sql_text.cast(source, field.dataType)
    assert text is not None, field  # the quarantine's types are all said in SQL
    return sql_text.column(text, field.name)


def ensure_quarantine_table(spark: SparkSession, lakehouse_path: str) -> str:
    """Create the (empty) quarantine table if it does not exist; return its path (a local
    table by delta-rs: ``lakehouse.driver_tables``)."""
    path = Layout(lakehouse_path).quarantine
    if not is_delta_table(path, spark) and not create_table(spark, path, QUARANTINE_SCHEMA):
        spark.createDataFrame([], QUARANTINE_SCHEMA).write.format("delta").mode("append").save(path)
    return path


# -- invariant -----------------------------------------------------------------------------


@dataclass
class InvariantReport:
    """Counts per destination and the offending records, by kind.

    ``offenders`` samples at most ``sample`` records per kind, as dicts with topic,
    partition, offset and where the record was found.
    """

    bronze_records: int = 0
    silver_records: int = 0
    quarantined_records: int = 0
    missing: int = 0  # in bronze, in neither silver nor quarantine
    in_both: int = 0  # in silver and in quarantine
    duplicated: int = 0  # more than once in silver, or in quarantine
    orphans: int = 0  # in silver or quarantine, not in bronze
    bronze_duplicates: int = 0  # more than once in bronze (bronze's own exactly-once)
    pending: int = 0  # in neither yet, in silver's backlog (``silver_backlog``): not a fault
    offenders: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        return not (
            self.missing
            or self.in_both
            or self.duplicated
            or self.orphans
            or self.bronze_duplicates
        )

    def summary(self) -> str:
        state = "holds" if self.holds else "VIOLATED"
        return (
            f"invariant {state}: bronze={self.bronze_records} silver={self.silver_records} "
            f"quarantine={self.quarantined_records} missing={self.missing} in_both={self.in_both} "
            f"duplicated={self.duplicated} orphans={self.orphans} "
            f"bronze_duplicates={self.bronze_duplicates} pending={self.pending}"
        )


def check_invariant(
    spark: SparkSession,
    lakehouse_path: str,
    *,
    bronze_tables: list[str] | None = None,
    sample: int = 20,
    while_running: bool = False,
) -> InvariantReport:
    """Check that every bronze record is in exactly one silver table or in quarantine.

    Args:
        lakehouse_path: the lakehouse root (bronze/, silver/, quarantine/ under it).
        bronze_tables: bronze table paths to check (default: every table under bronze/);
            silver and quarantine rows of topics outside them are then ignored.
        sample: how many offending records to name per kind.
        while_running: silver may not have taken every bronze record yet (a stream runs, or
            the ingest DAG's silver task has yet to): a record in neither silver nor
            quarantine whose bronze file is in silver's backlog
            (:func:`pipelines.silver_backlog.backlog_files`) is pending, not missing.
    """
    layout = Layout(lakehouse_path)
    bronze_paths = (
        bronze_tables if bronze_tables is not None else list_delta_tables(layout.bronze, spark)
    )
    report = InvariantReport()
    if not bronze_paths:
        return report
    bronze = _bronze_keys(spark, bronze_paths, lakehouse_path if while_running else None)
    places = _destination_counts(
        spark, layout, bronze, only_bronze_topics=bronze_tables is not None
    )
    classified = _classify(bronze, places).cache()
    try:
        _fill_report(report, classified, sample)
    finally:
        classified.unpersist()
    return report


_KEY = ("t", "p", "o")  # topic, partition, offset: a record's identity


def _bronze_keys(spark: SparkSession, paths: list[str], backlog_of: str | None) -> DataFrame:
    """(t, p, o, backlog) of every bronze row of the given tables; ``backlog``: its file is in
    silver's backlog of the lakehouse ``backlog_of`` (None: no row is)."""
    frames = [
        spark.read.format("delta")
        .load(p)
        .select(
            F.col("topic").alias("t"),
            F.col("partition").alias("p"),
            F.col("offset").alias("o"),
            _in_backlog(spark, backlog_of, p).alias("backlog"),
        )
        for p in paths
    ]
    bronze = frames[0]
    for frame in frames[1:]:
        bronze = bronze.unionByName(frame)
    return bronze


def _in_backlog(spark: SparkSession, lakehouse_path: str | None, bronze_path: str) -> Column:
    if lakehouse_path is None:
        return F.lit(False)
    from pipelines.silver_backlog import backlog_files

    files = backlog_files(spark, lakehouse_path, bronze_path)
    if files is None:
        return F.lit(True)
    name = F.element_at(F.split(F.col("_metadata.file_path"), "/"), -1)
    return name.isin(sorted(files)) if files else F.lit(False)


def _destination_rows(spark: SparkSession, layout: Layout) -> list[DataFrame]:
    """(t, p, o, where, s, q) of every silver row and every row still quarantined."""
    dests: list[DataFrame] = []
    for p in list_delta_tables(layout.silver, spark):
        dests.append(
            spark.read.format("delta")
            .load(p)
            .select(
                F.col("_kafka_topic").alias("t"),
                F.col("_kafka_partition").alias("p"),
                F.col("_kafka_offset").alias("o"),
                F.lit(table_name(p)).alias("where"),
                F.lit(1).alias("s"),
                F.lit(0).alias("q"),
            )
        )
    if is_delta_table(layout.quarantine, spark):
        active = spark.read.format("delta").load(layout.quarantine).filter(still_quarantined())
        dests.append(
            active.select(
                F.col("_kafka_topic").alias("t"),
                F.col("_kafka_partition").alias("p"),
                F.col("_kafka_offset").alias("o"),
                F.concat(F.lit("quarantine:"), F.col("reason_code")).alias("where"),
                F.lit(0).alias("s"),
                F.lit(1).alias("q"),
            )
        )
    return dests


def _destination_counts(
    spark: SparkSession, layout: Layout, bronze: DataFrame, *, only_bronze_topics: bool
) -> DataFrame:
    """Per record: how often it is in silver (sn), in quarantine (qn), and where."""
    dests = _destination_rows(spark, layout)
    if not dests:
        return spark.createDataFrame(
            [], "t string, p int, o long, sn long, qn long, where array<string>"
        )
    d = dests[0]
    for x in dests[1:]:
        d = d.unionByName(x)
    if only_bronze_topics:
        d = d.join(F.broadcast(bronze.select("t").distinct()), "t", "left_semi")
    return d.groupBy(*_KEY).agg(
        F.sum("s").alias("sn"),
        F.sum("q").alias("qn"),
        F.sort_array(F.collect_list("where")).alias("where"),
    )


def _classify(bronze: DataFrame, places: DataFrame) -> DataFrame:
    """Bronze counts beside destination counts, with the kind of fault (null: none)."""
    b_counts = bronze.groupBy(*_KEY).agg(
        F.count(F.lit(1)).alias("bn"), F.max("backlog").alias("backlog")
    )
    joined = b_counts.join(places, list(_KEY), "full_outer").select(
        *_KEY,
        "backlog",
        F.coalesce("bn", F.lit(0)).alias("bn"),
        F.coalesce("sn", F.lit(0)).alias("sn"),
        F.coalesce("qn", F.lit(0)).alias("qn"),
        "where",
    )
    kind = (
        F.when(F.col("bn") == 0, "orphans")
        .when(F.col("bn") > 1, "bronze_duplicates")
        .when((F.col("sn") > 0) & (F.col("qn") > 0), "in_both")
        .when((F.col("sn") + F.col("qn") == 0) & F.col("backlog"), "pending")
        .when(F.col("sn") + F.col("qn") == 0, "missing")
        .when(F.col("sn") + F.col("qn") > 1, "duplicated")
    )
    return joined.withColumn("kind", kind)


def _fill_report(report: InvariantReport, classified: DataFrame, sample: int) -> None:
    """Totals, counts per kind of fault, and up to ``sample`` offenders of each kind."""
    totals = classified.agg(
        F.sum("bn").alias("bn"), F.sum("sn").alias("sn"), F.sum("qn").alias("qn")
    ).first()
    assert totals is not None
    report.bronze_records = int(totals["bn"] or 0)
    report.silver_records = int(totals["sn"] or 0)
    report.quarantined_records = int(totals["qn"] or 0)
    for row in classified.filter(F.col("kind").isNotNull()).groupBy("kind").count().collect():
        setattr(report, row["kind"], int(row["count"]))
    if report.holds:
        return
    bad = classified.filter(F.col("kind").isNotNull() & (F.col("kind") != "pending"))
    ranked = bad.withColumn("rn", F.row_number().over(_window_by_kind())).filter(
        F.col("rn") <= sample
    )
    for row in ranked.orderBy("kind", "t", "p", "o").collect():
        report.offenders.setdefault(row["kind"], []).append(
            {
                "topic": row["t"],
                "partition": row["p"],
                "offset": row["o"],
                "bronze_count": row["bn"],
                "found_in": list(row["where"] or []),
            }
        )


def _window_by_kind() -> Any:
    from pyspark.sql.window import Window

    return Window.partitionBy("kind").orderBy("t", "p", "o")
