"""``lakehouse.driver_append``: small appends committed by delta-rs on tables Spark created and
reads, with the commit ``append_idempotent`` makes (a real session)."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from delta.tables import DeltaTable
from pyspark.sql import functions as F  # noqa: N812

from lakehouse.delta import Replays, append_idempotent, read_batch_marker
from lakehouse.driver_append import (
    MAX_RECORDS,
    append_arrow,
    appends_in_driver,
    collect_arrow,
    in_table_order,
)

FRESH = Replays(fresh_from=0)  # no batch of this app was written before
TS = dt.datetime(2026, 5, 6, 7, 8, 9)


def frame(spark: Any, first: int, n: int) -> Any:
    return spark.range(first, first + n, numPartitions=2).select(
        F.col("id").alias("offset"),
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("text"),
        F.concat(F.lit("r"), F.col("id").cast("string")).cast("binary").alias("raw"),
        F.lit(TS).cast("timestamp").alias("ts"),
        F.array(F.struct(F.lit("k").alias("key"), F.lit(b"x").alias("value"))).alias("headers"),
        F.lit(TS.date()).alias("day"),
    )


def created(spark: Any, path: Path) -> str:
    """An empty table as the jobs create it (Spark, partitioned by day)."""
    frame(spark, 0, 0).write.format("delta").partitionBy("day").mode("append").save(str(path))
    return str(path)


def history(spark: Any, path: str) -> list[Any]:
    return (
        DeltaTable.forPath(spark, path)
        .history()
        .select("version", "engineInfo", "userMetadata")
        .orderBy("version")
        .collect()
    )


def test_an_append_by_delta_rs_reads_as_a_spark_append(spark: Any, tmp_path: Path) -> None:
    by_rs, by_spark = created(spark, tmp_path / "rs"), created(spark, tmp_path / "spark")
    # batch 0 fresh (appended blind), batch 1 a restart's first (looked up, with Delta's ids)
    for batch_id, replays in enumerate((FRESH, Replays(fresh_from=2))):
        rows = frame(spark, batch_id * 5, 5)
        assert append_arrow(spark, rows.toArrow(), by_rs, "app", batch_id, replays=replays)
        append_idempotent(rows, by_spark, "app", batch_id, replays=replays)
    read_rs = spark.read.format("delta").load(by_rs)
    read_spark = spark.read.format("delta").load(by_spark)
    assert read_rs.schema == read_spark.schema
    assert sorted(read_rs.collect()) == sorted(read_spark.collect())
    assert read_rs.count() == 10
    commits = history(spark, by_rs)[1:]
    assert [c.engineInfo.split(":")[0] for c in commits] == ["delta-rs", "delta-rs"]
    assert [read_batch_marker(c.userMetadata) for c in commits] == [("app", 0), ("app", 1)]
    # Delta's transaction ids, as Spark reads them: only the batch that may be a replay's
    for path in (by_rs, by_spark):
        snapshot = DeltaTable.forPath(spark, path)._jdt.deltaLog().unsafeVolatileSnapshot()
        assert snapshot.transactions().get("app").get() == 1
    assert '"txn"' not in (Path(by_rs) / "_delta_log" / f"{1:020d}.json").read_text()
    assert '"txn"' in (Path(by_rs) / "_delta_log" / f"{2:020d}.json").read_text()
    assert DeltaTable.forPath(spark, by_rs).detail().first().partitionColumns == ["day"]


def test_a_batch_the_table_has_is_skipped(spark: Any, tmp_path: Path) -> None:
    path = created(spark, tmp_path / "t")
    rows = frame(spark, 0, 4).toArrow()
    planned_ms = int(time.time() * 1000)  # when a restart planned the batch it may replay
    assert append_arrow(spark, rows, path, "app", 7, replays=FRESH)  # blind: marker alone
    # a restarted query's first batch: found in the history by its marker, skipped
    assert append_arrow(spark, rows, path, "app", 7, replays=Replays(8, planned_ms))
    assert spark.read.format("delta").load(path).count() == 4
    assert append_arrow(spark, rows, path, "app", 8)  # any batch may be a replay: with ids
    assert append_arrow(spark, rows, path, "app", 8)  # found by Delta's transaction ids
    assert spark.read.format("delta").load(path).count() == 8
    assert append_arrow(spark, rows, path, "other-app", 8)  # another stream's batch 8
    assert spark.read.format("delta").load(path).count() == 12


def test_no_table_or_other_columns_leave_the_append_to_spark(spark: Any, tmp_path: Path) -> None:
    rows = frame(spark, 0, 3)
    assert not append_arrow(spark, rows.toArrow(), str(tmp_path / "none"), "app", 0)
    assert not (tmp_path / "none").exists()
    path = created(spark, tmp_path / "t")
    wider = rows.withColumn("extra", F.lit(1)).toArrow()
    other_type = rows.withColumn("offset", F.col("offset").cast("int")).toArrow()
    fewer = rows.drop("raw").toArrow()
    for data in (wider, other_type, fewer):
        assert not append_arrow(spark, data, path, "app", 0)
    assert spark.read.format("delta").load(path).count() == 0
    assert len(history(spark, path)) == 1  # nothing committed


def test_in_table_order_ignores_nullability_and_string_layouts(spark: Any, tmp_path: Path) -> None:
    from deltalake import DeltaTable as RsTable

    path = created(spark, tmp_path / "t")
    data = frame(spark, 0, 2).toArrow()
    table = RsTable(path)
    assert in_table_order(data, table) is not None
    strict = pa.schema([f.with_nullable(False) for f in data.schema])
    assert in_table_order(data.cast(strict), table) is not None
    large = data.set_column(1, "text", data["text"].cast(pa.large_string()))
    assert in_table_order(large, table) is not None


def test_only_small_batches_of_local_tables_go_through_the_driver(tmp_path: Path) -> None:
    assert appends_in_driver(str(tmp_path / "t"), MAX_RECORDS)
    assert appends_in_driver(f"file://{tmp_path}/t", 10)
    assert not appends_in_driver(str(tmp_path / "t"), MAX_RECORDS + 1)
    assert not appends_in_driver("s3a://bucket/lakehouse/bronze/t", 10)
    assert not appends_in_driver("file://other-host/lakehouse/t", 10)


def test_an_append_of_no_rows_commits_the_batch(spark: Any, tmp_path: Path) -> None:
    path = created(spark, tmp_path / "t")
    assert append_arrow(spark, frame(spark, 0, 0).toArrow(), path, "app", 3, replays=FRESH)
    commits = history(spark, path)
    assert read_batch_marker(commits[-1].userMetadata) == ("app", 3)


def test_an_evolved_table_takes_its_columns_in_its_own_order(spark: Any, tmp_path: Path) -> None:
    path = created(spark, tmp_path / "t")
    # Spark's mergeSchema adds a new column at the table's end
    evolved = frame(spark, 0, 2).withColumn("extra", F.lit("e"))
    append_idempotent(evolved, path, "app", 0, replays=FRESH, merge_schema=True)
    rows = frame(spark, 2, 3)
    middle = rows.select("offset", F.lit("m").alias("extra"), *rows.columns[1:])
    assert append_arrow(spark, middle.toArrow(), path, "app", 1, replays=FRESH)
    assert history(spark, path)[-1].engineInfo.startswith("delta-rs")
    read = spark.read.format("delta").load(path)
    assert read.columns[-1] == "extra"
    assert sorted((r.offset, r.extra) for r in read.collect()) == [
        (0, "e"),
        (1, "e"),
        (2, "m"),
        (3, "m"),
        (4, "m"),
    ]


def test_rows_that_cannot_be_collected_leave_the_append_to_spark(spark: Any) -> None:
    failing = frame(spark, 0, 3).withColumn("text", F.raise_error(F.lit("not collectable")))
    assert collect_arrow(failing, "t") is None
    assert collect_arrow(frame(spark, 0, 3), "t").num_rows == 3


def test_rows_adding_columns_and_fields_merge_them_as_spark_would(
    spark: Any, tmp_path: Path
) -> None:
    by_rs, by_spark = created(spark, tmp_path / "rs"), created(spark, tmp_path / "spark")
    rows = frame(spark, 0, 2)
    # a struct of the headers gains a field, and a column is added in the middle
    evolved = rows.select(
        "offset",
        F.lit("n").alias("added"),
        *[c for c in rows.columns[1:] if c != "headers"],
        F.array(
            F.struct(F.lit("k").alias("key"), F.lit(b"x").alias("value"), F.lit(7).alias("n"))
        ).alias("headers"),
    )
    assert not append_arrow(spark, evolved.toArrow(), by_rs, "app", 0, replays=FRESH)
    assert append_arrow(spark, evolved.toArrow(), by_rs, "app", 0, replays=FRESH, merge_schema=True)
    append_idempotent(evolved, by_spark, "app", 0, replays=FRESH, merge_schema=True)
    merged = spark.read.format("delta").load(by_rs)
    assert merged.schema == spark.read.format("delta").load(by_spark).schema
    assert merged.columns[-1] == "added"
    assert sorted(map(tuple, merged.select("offset", "added", "headers").collect())) == sorted(
        map(
            tuple,
            spark.read.format("delta")
            .load(by_spark)
            .select("offset", "added", "headers")
            .collect(),
        )
    )
    # a type change is no merge: Spark's to refuse or take
    other_type = rows.withColumn("offset", F.col("offset").cast("int")).toArrow()
    assert not append_arrow(spark, other_type, by_rs, "app", 1, merge_schema=True)
    assert len(history(spark, by_rs)) == 2


def test_a_merge_keeps_the_tables_nullability_and_takes_new_comments(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.sql import types as T  # noqa: N812

    from pipelines.silver.arrow_rows import commented

    path = str(tmp_path / "t")
    DeltaTable.createIfNotExists(spark).location(path).addColumn(
        "id", "STRING", nullable=False
    ).execute()
    data = pa.table({"id": pa.array(["a"]), "note": pa.array(["n"])})
    strict = data.cast(
        pa.schema([pa.field("id", pa.string(), False), pa.field("note", pa.string(), False)])
    )
    schema = T.StructType(
        [
            T.StructField("id", T.StringType(), False),
            T.StructField("note", T.StringType(), True, {"comment": "A note."}),
        ]
    )
    assert append_arrow(
        spark, commented(strict, schema), path, "app", 0, replays=FRESH, merge_schema=True
    )
    merged = spark.read.format("delta").load(path).schema
    assert [(f.name, f.nullable) for f in merged] == [("id", False), ("note", True)]
    assert merged["note"].metadata == {"comment": "A note."}
    assert spark.read.format("delta").load(path).collect() == [("a", "n")]


def test_a_table_feature_delta_rs_cannot_write_leaves_the_append_to_spark(
    spark: Any, tmp_path: Path, caplog: Any
) -> None:
    path = str(tmp_path / "tracked")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (offset BIGINT, text STRING) USING delta "
        "TBLPROPERTIES ('delta.enableRowTracking' = 'true')"
    )
    rows = pa.table({"offset": pa.array([1], pa.int64()), "text": pa.array(["a"])})
    with caplog.at_level("INFO", logger="lakehouse"):
        assert not append_arrow(spark, rows, path, "app", 0, replays=FRESH)
    assert "delta-rs cannot write it" in caplog.text
    assert "retrying" not in caplog.text  # a refusal, not a lost race retried with backoff
    assert DeltaTable.forPath(spark, path).history().count() == 1  # only the creation
    # the next batches go to Spark at once, without collecting rows for delta-rs first
    assert not appends_in_driver(path, 1)
    assert appends_in_driver(str(tmp_path / "plain"), 1)
