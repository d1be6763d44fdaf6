"""``lakehouse.driver_tables``: a local table created, and its comment and properties changed,
by delta-rs, read by Spark as the table Spark's own commands make (a real session)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import types as T  # noqa: N812

from lakehouse.driver_tables import (
    DEFAULTS_PREFIX,
    SparkOnlyTableError,
    create_table,
    local_schema,
    set_description,
    table_defaults,
)
from lakehouse.tables import table_metadata

SCHEMA = T.StructType(
    [
        T.StructField("id", T.StringType(), True, {"comment": "The order's id."}),
        T.StructField("lines", T.ArrayType(T.StructType([T.StructField("sku", T.StringType())]))),
        T.StructField("at", T.TimestampType()),
        T.StructField("counts", T.MapType(T.StringType(), T.LongType())),
    ]
)


def spark_created(spark: Any, path: str) -> None:
    from delta.tables import DeltaTable

    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(SCHEMA)
    builder.comment("Orders.").property("protolake.message_type", "shop.Order").execute()


def log_entry(path: str, version: int, action: str) -> dict[str, Any]:
    for line in Path(path, "_delta_log", f"{version:020d}.json").read_text().splitlines():
        entry = json.loads(line)
        if action in entry:
            return dict(entry[action])
    raise AssertionError(f"no {action} in version {version} of {path}")


def test_a_table_created_by_delta_rs_is_the_one_spark_creates(spark: Any, tmp_path: Path) -> None:
    by_rs, by_spark = str(tmp_path / "rs"), str(tmp_path / "spark")
    properties = {"protolake.message_type": "shop.Order"}
    assert create_table(spark, by_rs, SCHEMA, description="Orders.", properties=properties)
    spark_created(spark, by_spark)
    assert spark.read.format("delta").load(by_rs).schema == (
        spark.read.format("delta").load(by_spark).schema
    )
    assert table_metadata(spark, by_rs) == table_metadata(spark, by_spark)
    assert log_entry(by_rs, 0, "protocol") == log_entry(by_spark, 0, "protocol")
    fields = spark.read.format("delta").load(by_rs).schema
    assert fields["id"].metadata == {"comment": "The order's id."}
    # there already: left as it is
    assert create_table(spark, by_rs, T.StructType([T.StructField("x", T.LongType())]))
    assert spark.read.format("delta").load(by_rs).columns == SCHEMA.names


def test_spark_creates_what_delta_rs_would_not(spark: Any, tmp_path: Path) -> None:
    ntz = T.StructType([T.StructField("at", T.TimestampNTZType())])
    assert not create_table(spark, str(tmp_path / "ntz"), ntz)
    assert not create_table(spark, "s3a://bucket/lake/silver/t", SCHEMA)
    key = f"{DEFAULTS_PREFIX}enableDeletionVectors"
    spark.conf.set(key, "true")
    try:
        assert table_defaults(spark) is None
        assert not create_table(spark, str(tmp_path / "dv"), SCHEMA)
    finally:
        spark.conf.unset(key)
    assert table_defaults(spark) == {"delta.checkpointInterval": "100"}
    assert not any(p.exists() for p in (tmp_path / "ntz", tmp_path / "dv"))


def test_set_description_commits_only_what_differs(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    spark_created(spark, path)
    wanted = {"protolake.message_type": "shop.Order", "protolake.kafka_topics": "orders"}
    assert set_description(path, "Orders, one per row.", wanted)
    metadata = table_metadata(spark, path)
    assert metadata is not None
    assert metadata.description == "Orders, one per row."
    assert metadata.properties["protolake.kafka_topics"] == "orders"
    assert metadata.properties["delta.checkpointInterval"] == "100"
    versions = sorted(Path(path, "_delta_log").glob("*.json"))
    assert set_description(path, "Orders, one per row.", wanted)  # nothing differs
    assert sorted(Path(path, "_delta_log").glob("*.json")) == versions
    assert not set_description("s3a://bucket/lake/silver/t", "x", wanted)
    assert not set_description(str(tmp_path / "none"), "x", wanted)


def test_local_schema_reads_what_spark_reads(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    assert local_schema(path) is None
    spark_created(spark, path)
    assert local_schema(path) == spark.read.format("delta").load(path).schema
    with pytest.raises(SparkOnlyTableError, match="not a local table"):
        local_schema("s3a://bucket/lake/silver/t")


def test_a_table_of_table_features_stays_sparks(spark: Any, tmp_path: Path) -> None:
    """delta-rs would add features of its own to such a table's protocol: its comment,
    properties, schema and schema merges are left to Spark."""
    from pyspark.sql import functions as F  # noqa: N812

    from lakehouse.driver_append import append_arrow

    path = str(tmp_path / "dv")
    spark_created(spark, path)
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)"
    )
    protocol = log_entry(path, 1, "protocol")
    assert protocol["minWriterVersion"] == 7
    assert not set_description(path, "Another comment.", {"protolake.kafka_topics": "t"})
    with pytest.raises(SparkOnlyTableError, match="protocol 3/7"):
        local_schema(path)
    # every column of the table and one more: a merge delta-rs would take on a plain table
    widened = spark.read.format("delta").load(path).withColumn("added", F.lit(1)).toArrow()
    assert not append_arrow(spark, widened, path, "app", 0, merge_schema=True)
    assert sorted(p.name for p in Path(path, "_delta_log").glob("*.json")) == [
        f"{v:020d}.json" for v in (0, 1)
    ]


def test_concurrent_creations_end_with_one_table(spark: Any, tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from deltalake import DeltaTable

    for round_ in range(20):
        path = str(tmp_path / f"t{round_}")
        with ThreadPoolExecutor(6) as pool:
            made = list(pool.map(lambda p: create_table(spark, p, SCHEMA), [path] * 6))
        assert made == [True] * 6
        assert DeltaTable(path).version() == 0
