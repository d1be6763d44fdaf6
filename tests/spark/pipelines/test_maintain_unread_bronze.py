"""VACUUM of a bronze table spares the files silver has yet to read: skipped when the first
version silver's checkpoint has not read was committed before the retention, run otherwise
(silver caught up, or no silver query yet). Real Delta tables, checkpoints written as Spark
writes them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from lakehouse.layout import Layout
from pipelines.ops import maintain as maintain_mod
from pipelines.ops.unread_bronze import Unread, first_unread, vacuum_unsafe
from tests.support.checkpoints import delta_source_offset, write_checkpoint_batch


def _bronze_with_removed_files(spark: Any, lake: Path) -> Path:
    """bronze/orders: versions 0-2 overwrite each other (1 and 2 remove files), silver/x."""
    table = lake / "bronze" / "orders"
    for n in (10, 20, 30):
        spark.range(n).repartition(2).write.format("delta").mode("overwrite").save(str(table))
    spark.range(3).write.format("delta").save(str(lake / "silver" / "x"))
    return table


def _silver_read_up_to(lake: Path, next_version: int) -> None:
    checkpoint = Path(Layout(str(lake)).checkpoint("silver", "orders"))
    write_checkpoint_batch(checkpoint, 0, delta_source_offset(next_version))


def _maintain_forced(spark: Any, lake: Path) -> dict[str, Any]:
    return maintain_mod.maintain(
        spark,
        str(lake),
        retention_hours=0,
        force_retention=True,
        optimize=False,
        show_progress=False,
    )


def _bronze_orders_after_maintain(spark: Any, lake: Path) -> dict[str, Any]:
    """What the forced maintenance did to bronze/orders."""
    tables = _maintain_forced(spark, lake)["tables"]
    (orders,) = [t for t in tables if t["table"].endswith("/bronze/orders")]
    return orders


def _rewrite_without_data_change(spark: Any, table: Path) -> None:
    """A new version of the same rows in other files, as OPTIMIZE commits (dataChange false)."""
    rows = spark.read.format("delta").load(str(table))
    rows.repartition(3).write.format("delta").mode("overwrite").option("dataChange", "false").save(
        str(table)
    )


def _parquet(table: Path) -> int:
    return len(list(table.glob("*.parquet")))


def test_a_bronze_table_silver_has_not_read_keeps_its_files(spark: Any, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    bronze = _bronze_with_removed_files(spark, lake)
    _silver_read_up_to(lake, 1)  # version 0 read; 1 and 2 (and the files 0 added) to come
    assert first_unread(spark, Layout(str(lake)), str(bronze)) == Unread(1, snapshot=False)
    files = _parquet(bronze)
    out = _maintain_forced(spark, lake)
    by_table = {Path(t["table"]).name: t["vacuum"] for t in out["tables"]}
    assert "silver has yet to read a version committed" in by_table["orders"]["skipped"]
    assert by_table["x"] == {"files_deleted": 0}  # not bronze: vacuumed as before
    assert _parquet(bronze) == files
    assert spark.read.format("delta").option("versionAsOf", 1).load(str(bronze)).count() == 20


@pytest.mark.parametrize("silver", ["caught up", "never started"])
def test_a_bronze_table_silver_has_read_or_never_started_is_vacuumed(
    spark: Any, tmp_path: Path, silver: str
) -> None:
    lake = tmp_path / "lake"
    bronze = _bronze_with_removed_files(spark, lake)
    if silver == "caught up":
        _silver_read_up_to(lake, 3)
    files = _parquet(bronze)
    orders = _bronze_orders_after_maintain(spark, lake)
    assert orders["vacuum"]["files_deleted"] == 4  # the two overwritten versions' files
    assert _parquet(bronze) == files - 4


def test_versions_that_only_rearrange_files_are_not_waited_for(spark: Any, tmp_path: Path) -> None:
    # silver read every version with data; a rewrite without data change came after (as
    # OPTIMIZE commits): a stream never reads its files, VACUUM goes ahead
    lake = tmp_path / "lake"
    bronze = _bronze_with_removed_files(spark, lake)
    _silver_read_up_to(lake, 3)
    _rewrite_without_data_change(spark, bronze)
    assert first_unread(spark, Layout(str(lake)), str(bronze)) == Unread(3, snapshot=False)
    orders = _bronze_orders_after_maintain(spark, lake)
    assert orders["vacuum"]["files_deleted"] == 6  # the overwritten versions' and the rewrite's


@pytest.mark.parametrize("silver", ["first batch in flight", "still reading its snapshot"])
def test_a_snapshot_silver_is_reading_keeps_its_files(
    spark: Any, tmp_path: Path, silver: str
) -> None:
    # every file of the snapshot is needed, also those a rewrite without data change added
    lake = tmp_path / "lake"
    bronze = _bronze_with_removed_files(spark, lake)
    checkpoint = Path(Layout(str(lake)).checkpoint("silver", "orders"))
    in_flight = silver == "first batch in flight"
    offset = delta_source_offset(2, index=0, starting=True)
    write_checkpoint_batch(checkpoint, 0, offset, committed=not in_flight)
    _rewrite_without_data_change(spark, bronze)
    expected = Unread(0, snapshot=True) if in_flight else Unread(2, snapshot=True)
    assert first_unread(spark, Layout(str(lake)), str(bronze)) == expected
    files = _parquet(bronze)
    orders = _bronze_orders_after_maintain(spark, lake)
    assert "skipped" in orders["vacuum"] and _parquet(bronze) == files


def test_vacuum_is_unsafe_only_before_the_retention() -> None:
    now = time.time()
    assert vacuum_unsafe(None, 168) is None
    assert vacuum_unsafe(now - 3600, 168) is None
    why = vacuum_unsafe(now - 200 * 3600, 168)
    assert why is not None and "before the 168 h retention" in why
