"""A small batch's silver rows as Arrow (the driver path, ``driver_pass``): each version's
decoded rows with their lineage in the table's schema, the rows that pass quality and those a
rule quarantined (:class:`ArrowFailures`), and column comments for delta-rs, without a Spark
job.

:func:`table_rows` is ``plan.table_rows`` on Arrow: the rows that decoded, the error columns
dropped, the lineage added, the columns in the table's order, a column the version lacks as
nulls. A column whose type differs from the table's (a nested field added by a later version)
is Spark's to align (``tables.align_to``): :func:`table_rows` answers None and the batch takes
the DataFrame way for that table.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T  # noqa: N812
from pyspark.sql.pandas.types import to_arrow_type

from .decode import message_spark_schema
from .plan import TablePlan, table_schema
from .resolution import Resolution


def table_rows(
    decoded: pa.Table, res: Resolution, plan: TablePlan, processed_at: datetime, max_depth: int
) -> pa.Table | None:
    """The rows of one version that decoded, with their lineage, in the table's schema; None
    when a message column's type is not the table's (see the module docstring)."""
    assert plan.merged is not None and res.file_descriptor_set is not None
    version = message_spark_schema(res.file_descriptor_set, plan.message_type, max_depth)
    own = {f.name: f.dataType for f in version.fields}
    good = decoded.filter(pc.is_null(decoded.column("_decode_code")))
    n = good.num_rows
    lineage = {
        "_schema_id": pa.array([res.schema_id] * n, pa.int64()),
        "_schema_guid": pa.array([res.schema_guid] * n, pa.string()),
        "_message_type": pa.array([plan.message_type] * n, pa.string()),
        "_processed_at": pa.array([processed_at] * n, pa.timestamp("us", tz="UTC")),
    }
    fields = table_schema(plan.merged).fields
    columns: list[pa.Array | pa.ChunkedArray] = []
    for field in fields:
        if field.name in lineage:
            columns.append(lineage[field.name])
        elif field.name in own and own[field.name] != field.dataType:
            return None
        elif field.name in good.column_names:
            columns.append(good.column(field.name))
        else:
            columns.append(pa.nulls(n, to_arrow_type(field.dataType, timezone="UTC")))
    return pa.Table.from_arrays(columns, names=[f.name for f in fields])


def union_rows(parts: list[pa.Table]) -> pa.Table:
    """The versions' rows of one table, one after the other (all in the table's schema)."""
    return pa.concat_tables(parts, promote_options="permissive")


class ArrowFailures(NamedTuple):
    """The rows of one table a quality rule quarantined, as Arrow: the table's ``rows``, a mask
    of the ``failed`` ones and their ``reasons``, one per failed row (``arrow_rejects.
    quality_failures`` makes their quarantine rows)."""

    rows: pa.Table
    failed: pa.Array
    reasons: list[str]


def passed_rows(rows: pa.Table, failed: pa.Array) -> pa.Table:
    """The rows that stay in silver: those no failed quarantine rule flagged."""
    return rows.filter(pc.invert(failed))


def commented(rows: pa.Table, schema: T.StructType) -> pa.Table:
    """``rows`` with the column comments of ``schema`` (a silver table's Spark schema: field
    metadata ``{"comment": ...}``) as Arrow field metadata, at any depth: delta-rs takes a new
    column's comment from there when it merges the column into a table's schema."""
    target = pa.schema([_commented_field(f, _field_of(schema, f.name)) for f in rows.schema])
    return rows if target.equals(rows.schema, check_metadata=True) else rows.cast(target)


def _field_of(struct: T.StructType, name: str) -> T.StructField | None:
    return struct[name] if name in struct.names else None


def _commented_field(field: pa.Field, spark_field: T.StructField | None) -> pa.Field:
    if spark_field is None:
        return field
    out = field.with_type(_commented_type(field.type, spark_field.dataType))
    comment = spark_field.metadata.get("comment")
    return out.with_metadata({"comment": comment}) if comment else out


def _commented_type(arrow: pa.DataType, spark: T.DataType) -> pa.DataType:
    if pa.types.is_struct(arrow) and isinstance(spark, T.StructType):
        fields = [arrow.field(i) for i in range(arrow.num_fields)]
        return pa.struct([_commented_field(f, _field_of(spark, f.name)) for f in fields])
    if pa.types.is_list(arrow) and isinstance(spark, T.ArrayType):
        return pa.list_(
            arrow.value_field.with_type(_commented_type(arrow.value_type, spark.elementType))
        )
    if pa.types.is_large_list(arrow) and isinstance(spark, T.ArrayType):
        element = _commented_type(arrow.value_type, spark.elementType)
        return pa.large_list(arrow.value_field.with_type(element))
    if pa.types.is_map(arrow) and isinstance(spark, T.MapType):
        item = arrow.item_field.with_type(_commented_type(arrow.item_type, spark.valueType))
        return pa.map_(arrow.key_field, item)
    return arrow
