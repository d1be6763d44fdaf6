"""A small batch's table rows assembled as Arrow (``pipelines.silver.arrow_rows``) against the
DataFrame way (``plan.table_rows``), and their append when they change the table's schema."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql import types as T  # noqa: N812

from codec import SchemaResolver, open_registry
from pipelines.naming import table_name_for
from pipelines.silver import SilverBatch
from pipelines.silver.arrow_rows import table_rows
from pipelines.silver.plan import table_rows as spark_table_rows
from pipelines.silver.plan import table_schema
from tests.support.silver_testkit import bronze_row, write_bronze

TOPIC = "ut.arrow"
PING = "silvertest.v1.Ping"
AT = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def _decoded_pings(spark: Any, tmp_path: Any, producer: Any, versions: Any, registry: Any) -> Any:
    """A batch of two pings and a ping that does not decode, through the driver path's steps:
    (the batch, its plan of the Ping table, the version's resolution and decoded rows)."""
    v1 = versions["v1"]
    frames = [producer.frame(v1.Ping(id=f"p{i}"), TOPIC) for i in range(2)]
    rows = [bronze_row(f, TOPIC, i, key=b"k") for i, f in enumerate(frames)]
    rows.append(bronze_row(frames[0] + b"\xff\xff\xff\xff", TOPIC, 2))  # a bad payload
    lake = str(tmp_path / "lake")
    write_bronze(spark, f"{lake}/bronze/ut_arrow", rows)
    batch = SilverBatch(spark, lake, "app", SchemaResolver(open_registry(registry.url)))
    small = batch._small(spark.read.format("delta").load(f"{lake}/bronze/ut_arrow"))
    assert small is not None
    resolved = batch._resolve(small.counts)
    (plan,) = batch._plan(resolved)
    decoded = batch._decode_versions(small, [plan], resolved.key_types)
    (res,) = plan.versions
    return batch, plan, res, decoded[res.schema_key]


def _as_spark(spark: Any, rows: pa.Table, schema: T.StructType) -> list[Any]:
    df = spark.createDataFrame(rows, schema=schema)
    return sorted(df.collect(), key=lambda r: r["_kafka_offset"])


def test_arrow_rows_are_the_dataframe_rows_with_a_column_the_version_lacks(
    spark: Any, tmp_path: Any, producer: Any, versions: Any, registry: Any
) -> None:
    """A table whose schema has a column this version lacks (a later version added it): the
    Arrow rows hold nulls there, the lineage, and exactly the rows the DataFrame way gives."""
    _, plan, res, decoded = _decoded_pings(spark, tmp_path, producer, versions, registry)
    assert plan.merged is not None and decoded.failures == 1
    evolved = replace(
        plan, merged=T.StructType([*plan.merged.fields, T.StructField("note", T.StringType())])
    )
    rows = table_rows(decoded.arrow, res, evolved, AT, 3)
    assert rows is not None
    schema = table_schema(evolved.merged)
    assert rows.column_names == schema.names
    assert rows.column("note").null_count == rows.num_rows == 2
    by_spark = spark_table_rows(decoded.rows, res, evolved, F.lit(AT).cast("timestamp"))
    expected = sorted(by_spark.collect(), key=lambda r: r["_kafka_offset"])
    assert _as_spark(spark, rows, schema) == expected
    assert {r["_processed_at"].astimezone(UTC) for r in expected} == {AT}


def test_a_column_of_another_type_is_left_to_spark(
    spark: Any, tmp_path: Any, producer: Any, versions: Any, registry: Any
) -> None:
    _, plan, res, decoded = _decoded_pings(spark, tmp_path, producer, versions, registry)
    assert plan.merged is not None
    fields = [
        T.StructField(f.name, T.LongType()) if f.name == "id" else f for f in plan.merged.fields
    ]
    assert table_rows(decoded.arrow, res, replace(plan, merged=T.StructType(fields)), AT, 3) is None


def test_arrow_rows_that_add_a_column_are_appended_by_delta_rs_merging_the_schema(
    spark: Any, tmp_path: Any, producer: Any, versions: Any, registry: Any
) -> None:
    """Rows with a column the table lacks are appended by delta-rs, which merges the new
    column into the table, and the batch's rows are there once."""
    batch, plan, res, decoded = _decoded_pings(spark, tmp_path, producer, versions, registry)
    assert plan.merged is not None
    counts = batch._small(spark.read.format("delta").load(f"{batch.layout.root}/bronze/ut_arrow"))
    assert counts is not None
    first = table_rows(decoded.arrow, res, plan, AT, 3)
    assert first is not None
    batch.writes._table(plan, first, 0, counts.counts)
    evolved = replace(
        plan, merged=T.StructType([*plan.merged.fields, T.StructField("note", T.StringType())])
    )
    second = table_rows(decoded.arrow, res, evolved, AT, 3)
    assert second is not None
    batch.writes._table(evolved, second, 1, counts.counts)
    path = batch.layout.silver_table(table_name_for(PING))
    table = spark.read.format("delta").load(path)
    assert table.columns[-1] == "note"
    assert sorted(r["_kafka_offset"] for r in table.collect()) == [0, 0, 1, 1]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    assert [(r["operation"], r["engineInfo"].split(":")[0]) for r in history] == [
        ("CREATE TABLE", "delta-rs"),
        ("WRITE", "delta-rs"),
        ("WRITE", "delta-rs"),
    ]
