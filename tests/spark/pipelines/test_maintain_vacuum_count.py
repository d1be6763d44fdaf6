"""What ``protolake maintain`` reports a VACUUM deleted: read from the VACUUM's own ``VACUUM END``
commit after one listing of the table's storage, or counted by a dry run first when the
configuration turns Delta's VACUUM logging off; both report the files that left the folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakehouse.tables import table_version
from pipelines.ops import maintain as maintain_mod
from pipelines.ops import retention


def _parquet_files(table: Path) -> set[str]:
    return {p.name for p in table.glob("*.parquet")}


def _three_overwrites(spark: Any, table: Path) -> None:
    for n in (30, 40, 50):  # each overwrite leaves the previous files unreferenced
        spark.range(n).repartition(3).write.format("delta").mode("overwrite").save(str(table))


def _vacuum_operations(spark: Any, table: Path) -> list[str]:
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    return [r["operation"] for r in history if r["operation"].startswith("VACUUM")]


@pytest.fixture
def statements(spark: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The SQL statements the session runs (its own ``sql``, recorded); retention checks off,
    as ``--force-retention`` turns them."""
    seen: list[str] = []
    real_sql = spark.sql

    def recording(query: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(query)
        return real_sql(query, *args, **kwargs)

    monkeypatch.setattr(spark, "sql", recording)
    spark.conf.set(retention.RETENTION_CHECK_CONF, "false")
    try:
        yield seen
    finally:
        spark.conf.unset(retention.RETENTION_CHECK_CONF)


def _forced_vacuum(spark: Any, table: Path) -> dict[str, Any]:
    with maintain_mod.listing_parallelism(spark):  # as maintain sizes it
        return maintain_mod.maintain_table(
            spark, str(table), retention_hours=0, optimize=False, vacuum=True, dry_run=False
        )


@pytest.mark.parametrize("logging_conf", [None, "false"])
def test_a_forced_vacuum_reports_the_files_it_deleted(
    spark: Any, tmp_path: Path, statements: list[str], logging_conf: str | None
) -> None:
    table = tmp_path / "t"
    _three_overwrites(spark, table)
    before = _parquet_files(table)
    if logging_conf is not None:
        spark.conf.set(maintain_mod.VACUUM_LOGGING_CONF, logging_conf)
    try:
        row = _forced_vacuum(spark, table)
        again = _forced_vacuum(spark, table)  # nothing left: its own count, not the first one's
    finally:
        spark.conf.unset(maintain_mod.VACUUM_LOGGING_CONF)
    deleted = before - _parquet_files(table)
    assert len(deleted) >= 6  # the two overwritten versions' files
    assert row["vacuum"] == {"files_deleted": len(deleted)}
    assert again["vacuum"] == {"files_deleted": 0}
    dry_runs = [q for q in statements if q.startswith("VACUUM") and q.endswith("DRY RUN")]
    if logging_conf is None:  # one listing per VACUUM; its commits are in the history
        assert dry_runs == []
        assert _vacuum_operations(spark, table) == ["VACUUM END", "VACUUM START"] * 2
    else:  # configured off: a dry run counts first, and Delta logs nothing
        assert len(dry_runs) == 2
        assert _vacuum_operations(spark, table) == []
    assert spark.conf.get(maintain_mod.VACUUM_LOGGING_CONF, None) is None


def test_the_first_vacuum_end_after_the_version_is_read(
    spark: Any, tmp_path: Path, statements: list[str]
) -> None:
    table = tmp_path / "t"
    _three_overwrites(spark, table)
    before = _parquet_files(table)

    def version() -> int:
        return table_version(str(table), spark)

    start = version()
    first = _forced_vacuum(spark, table)["vacuum"]["files_deleted"]
    assert first == len(before - _parquet_files(table)) >= 6
    for i in range(3):  # other writers' commits, then a second VACUUM
        spark.range(i, i + 1).write.format("delta").mode("append").save(str(table))
    middle = version()
    second = _forced_vacuum(spark, table)["vacuum"]["files_deleted"]
    assert second is not None and second < first
    # read back behind later commits: the END of the VACUUM that began after the version
    assert maintain_mod._vacuumed_since(spark, str(table), start) == first
    assert maintain_mod._vacuumed_since(spark, str(table), middle) == second
    assert maintain_mod._vacuumed_since(spark, str(table), version()) is None  # none since


def test_maintain_turns_vacuum_logging_on_only_meanwhile_and_keeps_a_configured_off(
    spark: Any,
) -> None:
    key = maintain_mod.VACUUM_LOGGING_CONF
    assert spark.conf.get(key, None) is None
    with maintain_mod.vacuum_logging(spark) as logged:
        assert logged and spark.conf.get(key) == "true"
    assert spark.conf.get(key, None) is None
    for off in (key, "spark.databricks.delta.commitInfo.enabled"):
        spark.conf.set(off, "false")
        try:
            with maintain_mod.vacuum_logging(spark) as logged:
                assert not logged and spark.conf.get(off) == "false"
            assert spark.conf.get(off) == "false"
        finally:
            spark.conf.unset(off)


def _backdate_removed_files(table: Path, hours: float) -> None:
    """Make the files the latest overwrite removed look ``hours`` old: their tombstones'
    deletion time in the log and their modification time on disk."""
    import json
    import os
    import time

    then_ms = int((time.time() - hours * 3600) * 1000)
    for commit in sorted((table / "_delta_log").glob("*.json")):
        lines = commit.read_text().splitlines()
        out = []
        for line in lines:
            action = json.loads(line)
            if "remove" in action:
                action["remove"]["deletionTimestamp"] = then_ms
                os.utime(table / action["remove"]["path"], (then_ms / 1000, then_ms / 1000))
            out.append(json.dumps(action))
        commit.write_text("\n".join(out) + "\n")
    for checksum in (table / "_delta_log").glob("*.crc"):  # Hadoop's and Delta's, now stale
        checksum.unlink()
    for checksum in (table / "_delta_log").glob(".*.crc"):
        checksum.unlink()


@pytest.mark.parametrize(("retention", "doomed"), [(720, 0), (168, 3)])
def test_vacuum_keeps_the_retention_it_is_given(
    spark: Any, tmp_path: Path, retention: float, doomed: int
) -> None:
    """Files removed 200 h ago: a 720 h retention keeps them all (Delta 4.4 would apply the
    table's 7 days instead), 168 h deletes them."""
    table = tmp_path / "bronze" / "t"
    spark.range(30).repartition(3).write.format("delta").save(str(table))
    spark.range(40).repartition(2).write.format("delta").mode("overwrite").save(str(table))
    _backdate_removed_files(table, hours=200)
    out = maintain_mod.maintain(
        spark,
        str(tmp_path),
        group="bronze",
        retention_hours=retention,
        optimize=False,
        dry_run=True,
        show_progress=False,
    )
    assert [r["vacuum"]["files_to_delete"] for r in out["tables"]] == [doomed]


def test_a_retention_window_setting_the_job_made_is_kept(spark: Any, tmp_path: Path) -> None:
    """A job that set Delta's retention-window setting itself ([spark.conf]) keeps its
    choice: with it on, Delta applies the table's 7 days, whatever the retention asked."""
    table = tmp_path / "bronze" / "t"
    spark.range(30).repartition(3).write.format("delta").save(str(table))
    spark.range(40).repartition(2).write.format("delta").mode("overwrite").save(str(table))
    _backdate_removed_files(table, hours=200)
    spark.conf.set(retention.RETENTION_WINDOW_CONF, "true")
    try:
        out = maintain_mod.maintain(
            spark,
            str(tmp_path),
            group="bronze",
            retention_hours=720,
            optimize=False,
            dry_run=True,
            show_progress=False,
        )
        assert spark.conf.get(retention.RETENTION_WINDOW_CONF) == "true"
    finally:
        spark.conf.unset(retention.RETENTION_WINDOW_CONF)
    assert [r["vacuum"]["files_to_delete"] for r in out["tables"]] == [3]


@pytest.mark.parametrize("session_had", [None, "true"])
def test_a_forced_maintenance_gives_the_session_its_retention_check_back(
    spark: Any, tmp_path: Path, session_had: str | None
) -> None:
    key = retention.RETENTION_CHECK_CONF
    table = tmp_path / "lake" / "bronze" / "t"
    _three_overwrites(spark, table)
    if session_had is not None:
        spark.conf.set(key, session_had)
    try:
        out = maintain_mod.maintain(
            spark,
            str(tmp_path / "lake"),
            group="bronze",
            retention_hours=0,
            force_retention=True,
            optimize=False,
            show_progress=False,
        )
        assert out["forced_retention"] is True and out["failed"] == []
        assert out["tables"][0]["vacuum"]["files_deleted"] > 0  # the check was off meanwhile
        assert spark.conf.get(key, None) == session_had
    finally:
        spark.conf.unset(key)
