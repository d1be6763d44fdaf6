"""A small batch's silver rows as Arrow (the driver path, ``driver_pass``): each version's
decoded rows with their lineage in the table's schema, and the coordinates of the rows a
quality rule quarantined, without a Spark job.

:func:`table_rows` is ``plan.table_rows`` on Arrow: the rows that decoded, the error columns
dropped, the lineage added, the columns in the table's order, a column the version lacks as
nulls. A column whose type differs from the table's (a nested field added by a later version)
is Spark's to align (``tables.align_to``): :func:`table_rows` answers None and the batch takes
the DataFrame way for that table.
"""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T  # noqa: N812
from pyspark.sql.pandas.types import to_arrow_type

from .decode import message_spark_schema
from .plan import TablePlan, table_schema
from .resolution import Resolution

_DQ_COLUMNS = T.StructType(
    [
        T.StructField("_kafka_topic", T.StringType()),
        T.StructField("_kafka_partition", T.IntegerType()),
        T.StructField("_kafka_offset", T.LongType()),
        T.StructField("reason_code", T.StringType()),
        T.StructField("stage", T.StringType()),
        T.StructField("reason", T.StringType()),
    ]
)


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


def quarantined_ids(
    session: SparkSession, rows: pa.Table, failed: pa.Array, reasons: list[str]
) -> DataFrame:
    """The Kafka coordinates of the rows a quality rule quarantined, with their reason, as
    ``rejects.quarantine_dq`` reads a checker's ``failed`` rows (a local relation)."""
    from quality.split import REASON_CODE, STAGE

    mine = rows.filter(failed)
    n = mine.num_rows
    ids = pa.table(
        {
            "_kafka_topic": mine.column("_kafka_topic"),
            "_kafka_partition": mine.column("_kafka_partition"),
            "_kafka_offset": mine.column("_kafka_offset"),
            "reason_code": pa.array([REASON_CODE] * n, pa.string()),
            "stage": pa.array([STAGE] * n, pa.string()),
            "reason": pa.array(reasons, pa.string()),
        }
    )
    return session.createDataFrame(ids, schema=_DQ_COLUMNS)


def passed_rows(rows: pa.Table, failed: pa.Array) -> pa.Table:
    """The rows that stay in silver: those no failed quarantine rule flagged."""
    return rows.filter(pc.invert(failed))
