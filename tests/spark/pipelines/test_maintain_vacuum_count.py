"""What ``protolake maintain`` reports a VACUUM deleted: read from the VACUUM's own ``VACUUM END``
commit (one listing of the table's storage), or counted by a dry run first when the
configuration turns Delta's VACUUM logging off; both report the files that left the folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipelines.ops import maintain as maintain_mod


def _parquet_files(table: Path) -> set[str]:
    return {p.name for p in table.glob("*.parquet")}


def _three_overwrites(spark: Any, table: Path) -> None:
    for n in (30, 40, 50):  # each overwrite leaves the previous files unreferenced
        spark.range(n).repartition(3).write.format("delta").mode("overwrite").save(str(table))


def _vacuum_operations(spark: Any, table: Path) -> list[str]:
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    return [r["operation"] for r in history if r["operation"].startswith("VACUUM")]


def _forced_vacuum(spark: Any, table: Path, *, logged: bool) -> dict[str, Any]:
    with maintain_mod.listing_parallelism(spark):  # as maintain sizes it
        return maintain_mod.maintain_table(
            spark,
            str(table),
            retention_hours=0,
            optimize=False,
            vacuum=True,
            dry_run=False,
            vacuum_logged=logged,
        )


@pytest.mark.parametrize("logging_conf", [None, "false"])
def test_a_forced_vacuum_reports_the_files_it_deleted(
    spark: Any, tmp_path: Path, logging_conf: str | None
) -> None:
    table = tmp_path / "t"
    _three_overwrites(spark, table)
    before = _parquet_files(table)
    spark.conf.set(maintain_mod.RETENTION_CHECK_CONF, "false")  # as --force-retention does
    if logging_conf is not None:
        spark.conf.set(maintain_mod.VACUUM_LOGGING_CONF, logging_conf)
    try:
        row = _forced_vacuum(spark, table, logged=logging_conf is None)
        # a second VACUUM finds nothing left: its END commit, not the first one's, is read
        again = _forced_vacuum(spark, table, logged=logging_conf is None)
    finally:
        spark.conf.unset(maintain_mod.VACUUM_LOGGING_CONF)
        spark.conf.unset(maintain_mod.RETENTION_CHECK_CONF)
    deleted = before - _parquet_files(table)
    assert len(deleted) >= 6  # the two overwritten versions' files
    assert row["vacuum"] == {"files_deleted": len(deleted)}
    assert again["vacuum"] == {"files_deleted": 0}
    logged = _vacuum_operations(spark, table)
    assert logged == ([] if logging_conf == "false" else ["VACUUM END", "VACUUM START"] * 2)


def test_maintain_turns_vacuum_logging_on_only_meanwhile_and_keeps_a_configured_off(
    spark: Any,
) -> None:
    key = maintain_mod.VACUUM_LOGGING_CONF
    assert spark.conf.get(key, None) is None
    with maintain_mod.vacuum_logging(spark) as logged:
        assert logged and spark.conf.get(key) == "true"
    assert spark.conf.get(key, None) is None
    spark.conf.set(key, "false")
    try:
        with maintain_mod.vacuum_logging(spark) as logged:
            assert not logged and spark.conf.get(key) == "false"
        assert spark.conf.get(key) == "false"
    finally:
        spark.conf.unset(key)


def test_the_vacuum_end_is_found_behind_other_writers_commits(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    _three_overwrites(spark, table)
    before = _parquet_files(table)
    version = int(spark.sql(f"DESCRIBE HISTORY delta.`{table}` LIMIT 1").first()["version"])
    spark.conf.set(maintain_mod.RETENTION_CHECK_CONF, "false")
    try:
        with maintain_mod.listing_parallelism(spark), maintain_mod.vacuum_logging(spark):
            spark.sql(f"VACUUM delta.`{table}` RETAIN 0 HOURS").collect()
    finally:
        spark.conf.unset(maintain_mod.RETENTION_CHECK_CONF)
    for i in range(20):  # more commits than the first page of history read back
        spark.range(i, i + 1).write.format("delta").mode("append").save(str(table))
    deleted = len(before - _parquet_files(table))
    assert deleted >= 6
    assert maintain_mod._vacuumed_since(spark, str(table), version) == deleted
    newest = int(spark.sql(f"DESCRIBE HISTORY delta.`{table}` LIMIT 1").first()["version"])
    with pytest.raises(RuntimeError, match="no VACUUM END"):
        maintain_mod._vacuumed_since(spark, str(table), newest - 3)
