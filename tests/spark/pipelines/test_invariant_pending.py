"""While silver runs, a bronze record it has not taken yet is pending, not missing: the audit's
invariant (``check_invariant(while_running=True)``) reads silver's backlog from its
checkpoint (``pipelines.silver_backlog``); a record silver did take and lost is still missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakehouse.layout import Layout
from pipelines.quarantine import check_invariant
from tests.support.checkpoints import delta_source_offset, write_checkpoint_batch

TOPIC = "orders"


def _bronze(spark: Any, lake: Path) -> str:
    """A bronze table of three commits (versions 0, 1, 2), three records each."""
    path = str(lake / "bronze" / TOPIC)
    for version in range(3):
        rows = [(TOPIC, 0, 3 * version + i) for i in range(3)]
        df = spark.createDataFrame(rows, "topic string, partition int, offset long")
        df.write.format("delta").mode("append").save(path)
    return path


def _silver(spark: Any, lake: Path, offsets: list[int]) -> None:
    rows = [(TOPIC, 0, o) for o in offsets]
    schema = "_kafka_topic string, _kafka_partition int, _kafka_offset long"
    path = str(lake / "silver" / "shop_order")
    spark.createDataFrame(rows, schema).write.format("delta").mode("overwrite").save(path)


def _silver_read_up_to(lake: Path, version: int, *, starting: bool = False) -> None:
    """Silver's checkpoint of the bronze table: its last committed batch reads ``version`` next."""
    checkpoint = Path(Layout(str(lake)).checkpoint("silver", TOPIC))
    write_checkpoint_batch(checkpoint, 0, delta_source_offset(version, -1, starting))


def test_records_silver_has_not_taken_are_pending(spark: Any, tmp_path: Path) -> None:
    lake = tmp_path / "lh"
    _bronze(spark, lake)
    _silver(spark, lake, [0, 1, 2, 3, 5])  # versions 0 and 1 taken; offset 4 lost
    _silver_read_up_to(lake, 2)

    report = check_invariant(spark, str(lake), while_running=True)
    assert (report.missing, report.pending) == (1, 3)
    assert [r["offset"] for r in report.offenders["missing"]] == [4]
    assert "pending" not in report.offenders and not report.holds

    after_the_batch = check_invariant(spark, str(lake))  # the default: everything taken
    assert (after_the_batch.missing, after_the_batch.pending) == (4, 0)


def test_the_audit_holds_while_silver_catches_up(spark: Any, tmp_path: Path) -> None:
    lake = tmp_path / "lh"
    _bronze(spark, lake)
    _silver(spark, lake, [0, 1, 2, 3, 4, 5])
    _silver_read_up_to(lake, 2)
    report = check_invariant(spark, str(lake), while_running=True)
    assert report.holds and (report.missing, report.pending) == (0, 3)


def test_before_a_first_commit_every_record_is_pending(spark: Any, tmp_path: Path) -> None:
    lake = tmp_path / "lh"
    _bronze(spark, lake)
    _silver(spark, lake, [])
    checkpoint = Path(Layout(str(lake)).checkpoint("silver", TOPIC))
    write_checkpoint_batch(checkpoint, 0, delta_source_offset(3, -1), committed=False)
    report = check_invariant(spark, str(lake), while_running=True)
    assert report.holds and report.pending == 9
    _silver_read_up_to(lake, 2, starting=True)  # committed, still in its starting snapshot
    assert check_invariant(spark, str(lake), while_running=True).pending == 9


def test_a_table_silver_never_took_is_missing(spark: Any, tmp_path: Path) -> None:
    """No silver checkpoint: silver never ran on the table; the audit must not pass over it."""
    lake = tmp_path / "lh"
    _bronze(spark, lake)
    _silver(spark, lake, [])
    report = check_invariant(spark, str(lake), while_running=True)
    assert (report.missing, report.pending) == (9, 0) and not report.holds


def test_a_compaction_s_files_are_not_backlog(spark: Any, tmp_path: Path) -> None:
    """Compacted files hold records of versions silver took: one it lost stays missing."""
    from delta.tables import DeltaTable

    lake = tmp_path / "lh"
    bronze = _bronze(spark, lake)
    DeltaTable.forPath(spark, bronze).optimize().executeCompaction()  # version 3
    _silver(spark, lake, [0, 1, 2, 3, 5, 6, 7, 8])  # offset 4 (of version 1) lost
    _silver_read_up_to(lake, 3)
    report = check_invariant(spark, str(lake), while_running=True)
    assert (report.missing, report.pending) == (1, 0)
