"""The silver tables: their schema as versions evolve (step 3 of a micro-batch), their
creation and the shape of their appends (step 7's writes are ``pipelines.silver.writes``).

- One table per fully-qualified message type, at ``<lakehouse>/silver/<table_name_for(type)>``;
  every schema version of the type writes there. The table schema is the union of the
  versions' fields: a version adding fields adds columns (Delta ``mergeSchema``; existing
  files are not rewritten, old rows read null there). ``schemas_compatible`` decides, version
  by version in schema-key order, whether a version can be merged; one that cannot (a field
  changing to an incompatible type, ...) is reported as a conflict and its records go to
  quarantine with ``SCHEMA_CONFLICT``; the table is left as it was.
- Each table records its message type in the table property ``protolake.message_type``;
  writing another type there raises (it would take a hash collision, see naming.py).
- The batch's appends (``pipelines.silver.writes``, with ``lakehouse.delta.append_idempotent``)
  name the query's app id and batch id in the commit: a replayed batch that a table already
  has is skipped, so a retried micro-batch never duplicates. Concurrent commits from another
  query (two bronze tables holding one message type) are retried a few times.
- The batch registers each table in the catalog as ``<silver database>.<table>``
  (``pipelines.silver.registration``), with :func:`describe_silver_table`'s comment and
  properties.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - pyspark's usual alias
from pyspark.sql import types as T  # noqa: N812

from lakehouse import sql_text
from lakehouse.driver_tables import SparkOnlyTableError, create_table, local_schema
from lakehouse.layout import local_path
from lakehouse.tables import is_delta_table, table_properties
from pipelines.naming import KAFKA_TOPICS_PROPERTY, MESSAGE_TYPE_PROPERTY

if TYPE_CHECKING:
    from .resolution import Resolution

log = logging.getLogger(__name__)

#: Columns silver adds to the message's own (their names start with "_").
LINEAGE_FIELDS: tuple[T.StructField, ...] = (
    T.StructField("_key", T.BinaryType()),
    T.StructField("_key_decoded", T.StringType()),
    T.StructField("_kafka_topic", T.StringType()),
    T.StructField("_kafka_partition", T.IntegerType()),
    T.StructField("_kafka_offset", T.LongType()),
    T.StructField("_kafka_timestamp", T.TimestampType()),
    T.StructField("_schema_id", T.LongType()),
    T.StructField("_schema_guid", T.StringType()),
    T.StructField("_message_type", T.StringType()),
    T.StructField("_processed_at", T.TimestampType()),
)
LINEAGE_NAMES = frozenset(f.name for f in LINEAGE_FIELDS)


class TableTypeMismatchError(RuntimeError):
    """A silver table holds another message type than the one about to be written."""


def message_part(table_schema: T.StructType) -> T.StructType:
    """The message columns of a silver table's schema (lineage columns removed)."""
    return T.StructType([f for f in table_schema.fields if f.name not in LINEAGE_NAMES])


def existing_schema(spark: SparkSession, path: str) -> T.StructType | None:
    """The schema of the Delta table at ``path``, or None when there is none yet (a local
    table's read by delta-rs: ``lakehouse.driver_tables.local_schema``)."""
    if local_path(path) is not None:
        try:
            return local_schema(path)
        except SparkOnlyTableError:
            pass
    if not is_delta_table(path, spark):
        return None
    return spark.read.format("delta").load(path).schema


def align_column(expr: Column, source: T.DataType, target: T.DataType) -> Column:
    """Reshape ``expr`` (of type ``source``) to ``target`` by field name, recursively.

    Struct fields missing in ``source`` become nulls; struct-to-struct casts in Spark are by
    position, so structs are rebuilt field by field instead of cast.
    """
    if source == target:
        return expr
    if isinstance(source, T.StructType) and isinstance(target, T.StructType):
        by_name = {f.name: f for f in source.fields}
        parts = []
        for f in target.fields:
            if f.name in by_name:
                parts.append(
                    align_column(expr.getField(f.name), by_name[f.name].dataType, f.dataType).alias(
                        f.name
                    )
                )
            else:
                parts.append(F.lit(None).cast(f.dataType).alias(f.name))
        return F.when(expr.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*parts))
    if isinstance(source, T.ArrayType) and isinstance(target, T.ArrayType):
        if isinstance(source.elementType, T.StructType | T.ArrayType | T.MapType):
            return F.transform(
                expr, lambda x: align_column(x, source.elementType, target.elementType)
            )
        return expr.cast(target)
    if isinstance(source, T.MapType) and isinstance(target, T.MapType):
        if isinstance(source.valueType, T.StructType | T.ArrayType | T.MapType):
            return F.transform_values(
                expr, lambda _k, v: align_column(v, source.valueType, target.valueType)
            )
        return expr.cast(target)
    return expr.cast(target)


def align_to(df: DataFrame, target: T.StructType) -> DataFrame:
    """Select ``df``'s columns in ``target``'s order and types; missing ones are null.

    Columns that need no reshaping are built as SQL text (``lakehouse.sql_text``: a parse
    each, not a JVM call per node); a frame already of ``target``'s schema is returned as is.
    """
    if df.schema == target:
        return df
    by_name = {f.name: f for f in df.schema.fields}
    return df.select(*[_aligned(by_name.get(f.name), f) for f in target.fields])


def _aligned(source: T.StructField | None, target: T.StructField) -> Column:
    if source is not None and source.dataType == target.dataType:
        return sql_text.column(sql_text.quoted(target.name), target.name)
    if source is not None:
        column = F.col(sql_text.quoted(target.name))
        return align_column(column, source.dataType, target.dataType).alias(target.name)
    null = sql_text.cast("NULL", target.dataType)
    if null is not None:
        return sql_text.column(null, target.name)
    return F.lit(None).cast(target.dataType).alias(target.name)


def ensure_table(
    spark: SparkSession,
    path: str,
    schema: T.StructType,
    message_type: str,
    *,
    comment: str = "",
    properties: Mapping[str, str] | None = None,
) -> None:
    """Create the silver table with ``schema`` if needed; check it holds ``message_type``.

    A table created here records ``message_type`` in its properties, beside ``properties``,
    and ``comment`` as its description (an existing table is left as it is). A local table
    is created by delta-rs (``lakehouse.driver_tables``: the same table in milliseconds),
    another by Spark.

    Raises:
        TableTypeMismatchError: the table exists and records another message type.
    """
    from delta.tables import DeltaTable

    if is_delta_table(path, spark):
        found = table_properties(spark, path).get(MESSAGE_TYPE_PROPERTY)
        if found is not None and found != message_type:
            raise TableTypeMismatchError(f"{path} holds {found}, not {message_type}")
        return
    wanted = {**(properties or {}), MESSAGE_TYPE_PROPERTY: message_type}
    if create_table(spark, path, schema, description=comment, properties=wanted):
        return
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    if comment:
        builder = builder.comment(comment)
    for key, value in sorted(wanted.items()):
        builder = builder.property(key, value)
    builder.execute()


#: Table property naming the registry's schema versions a silver table holds (comma-separated).
SCHEMA_VERSIONS_PROPERTY = "protolake.schema_versions"


def describe_silver_table(
    message_type: str,
    resolutions: Sequence[Resolution],
    versions: Sequence[str],
    topics: Sequence[str] = (),
) -> tuple[str, dict[str, str]]:
    """The catalog comment and properties of a silver table, from its Protobuf schema.

    The comment is the message's own comment in its .proto (when the registry's schema has
    one), what the table holds, the Kafka topics its records came from and the registry's
    schema versions (``id:<n>``/``guid:<g>``) written so far; the properties name the message
    type, those versions and those topics. Column comments come from the fields' comments, set
    in the Delta schema when the columns are created (``pipelines.proto_types``).
    """
    from pipelines.proto_types import message_comment

    own = ""
    for r in resolutions:
        if r.file_descriptor_set is not None:
            own = message_comment(r.file_descriptor_set, message_type)
            if own:
                break
    what = (
        f"Protobuf message {message_type}, decoded from Kafka by protolake silver "
        "(one row per record; _kafka_* columns say where it came from)."
    )
    if topics:
        what += f" Kafka topic{'s' if len(topics) > 1 else ''}: {', '.join(topics)}."
    what += f" Schema registry versions: {', '.join(versions)}."
    comment = f"{own}\n\n{what}" if own else what
    properties = {
        MESSAGE_TYPE_PROPERTY: message_type,
        SCHEMA_VERSIONS_PROPERTY: ",".join(versions),
    }
    if topics:
        properties[KAFKA_TOPICS_PROPERTY] = ",".join(topics)
    return comment, properties


def registered_sources(spark: SparkSession, path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The schema versions and Kafka topics the table at ``path`` records in its properties
    (empty for a new table)."""
    props = table_properties(spark, path)

    def listed(key: str) -> tuple[str, ...]:
        return tuple(sorted(v for v in props.get(key, "").split(",") if v))

    return listed(SCHEMA_VERSIONS_PROPERTY), listed(KAFKA_TOPICS_PROPERTY)


#: a silver append (or a quarantine append) of at most this many rows is written by one task
ROWS_PER_WRITE_TASK = 100_000


def write_partitions(df: DataFrame, rows: int) -> DataFrame:
    """``df`` for an append of at most ``rows`` rows: in one partition when one task holds
    them (:data:`ROWS_PER_WRITE_TASK`), else as it is.

    A silver table's rows and the quarantine's are unions of parts (one per schema version
    and reason), each with the bronze batch's partitions: appended as they are, a batch of a
    few hundred records runs a task per part and partition (16 for one table's append was
    common) and writes a file from each one with rows. A larger batch keeps its partitions:
    coalescing merges them by count, not by rows, so a skewed batch would land in a few
    hands. The caller must have materialized the expensive inputs before, at the batch's
    parallelism (silver: the decoded records and the quarantine rows are computed before,
    ``lakehouse.materialized``), or the one task would compute them."""
    return df.coalesce(1) if rows <= ROWS_PER_WRITE_TASK else df


def as_frame(spark: SparkSession, rows: DataFrame | pa.Table, schema: T.StructType) -> DataFrame:
    """``rows`` as a DataFrame: an Arrow table (rows of the driver path) made one in
    ``schema``, a DataFrame as it is."""
    return spark.createDataFrame(rows, schema=schema) if isinstance(rows, pa.Table) else rows


def union_all(frames: Sequence[DataFrame]) -> DataFrame | None:
    """Union DataFrames of one schema, by position (None for no frames)."""
    out: DataFrame | None = None
    for f in frames:
        out = f if out is None else out.union(f)
    return out
