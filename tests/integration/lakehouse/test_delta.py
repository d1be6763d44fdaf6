"""lakehouse.delta on real Delta tables: idempotent appends, and the same answers about
tables from Spark (Hadoop file system) and from delta-rs (no JVM)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakehouse.delta import append_idempotent
from lakehouse.layout import Layout, table_name
from lakehouse.tables import is_delta_table, list_delta_tables, silver_versions, table_version

pytestmark = pytest.mark.integration


def rows(spark: Any, n: int, extra: bool = False) -> Any:
    df = spark.range(n).selectExpr("id", "cast(id % 2 as int) as part")
    return df.selectExpr("*", "'x' as extra") if extra else df


def test_an_append_is_skipped_when_the_table_has_its_batch(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    append_idempotent(rows(spark, 3), path, "app-1", 0, partition_by=("part",))
    append_idempotent(rows(spark, 3), path, "app-1", 0, partition_by=("part",))  # replayed
    assert spark.read.format("delta").load(path).count() == 3
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail.partitionColumns == ["part"]
    append_idempotent(rows(spark, 2), path, "app-1", 1)
    append_idempotent(rows(spark, 2), path, "app-2", 0)  # another stream's batch 0
    assert spark.read.format("delta").load(path).count() == 3 + 2 + 2


def test_merge_schema_adds_the_new_columns(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    append_idempotent(rows(spark, 2), path, "app", 0)
    with pytest.raises(Exception, match="(?i)schema"):
        append_idempotent(rows(spark, 2, extra=True), path, "app", 1, attempts=1)
    append_idempotent(rows(spark, 2, extra=True), path, "app", 1, merge_schema=True)
    table = spark.read.format("delta").load(path)
    assert table.columns == ["id", "part", "extra"]
    assert sorted(str(r.extra) for r in table.collect()) == ["None", "None", "x", "x"]


def test_tables_versions_and_listing_agree_with_and_without_spark(
    spark: Any, tmp_path: Path
) -> None:
    lh = Layout(str(tmp_path / "lh"))
    assert list_delta_tables(lh.silver, spark) == []
    assert list_delta_tables(lh.silver) == []
    assert silver_versions(lh, spark) == {} == silver_versions(lh)
    for name, batches in (("b_table", 3), ("a_table", 1)):
        for batch in range(batches):
            append_idempotent(rows(spark, 1), lh.silver_table(name), "app", batch)
    (tmp_path / "lh" / "silver" / "not_a_table").mkdir()
    (tmp_path / "lh" / "silver" / "empty_log" / "_delta_log").mkdir(parents=True)

    with_spark = list_delta_tables(lh.silver, spark)
    without = list_delta_tables(lh.silver)
    assert [table_name(p) for p in with_spark] == ["a_table", "b_table"]
    assert without == [lh.silver_table("a_table"), lh.silver_table("b_table")]
    assert {table_name(p): v for p, v in silver_versions(lh, spark).items()} == {
        "a_table": 0,
        "b_table": 2,
    }
    assert silver_versions(lh) == {lh.silver_table("a_table"): 0, lh.silver_table("b_table"): 2}
    for path in (lh.silver_table("a_table"), with_spark[0]):
        assert is_delta_table(path, spark)
    assert is_delta_table(lh.silver_table("a_table"))
    for path in (lh.silver, lh.silver_table("not_a_table"), lh.silver_table("empty_log")):
        assert not is_delta_table(path, spark)
        assert not is_delta_table(path)
    assert table_version(lh.silver_table("b_table"), spark) == 2
    assert table_version(lh.silver_table("b_table")) == 2


def test_listing_without_spark_needs_a_local_folder() -> None:
    with pytest.raises(ValueError, match="needs a Spark session"):
        list_delta_tables("s3a://bucket/lh/silver")
