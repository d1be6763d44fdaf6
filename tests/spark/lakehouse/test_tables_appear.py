"""A Delta table that another process creates is found by this session, even when the session
looked at its folder while the first commit was being written (Spark with Delta, no service)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakehouse.tables import is_delta_table, list_delta_tables


def test_a_table_first_seen_without_a_commit_is_found_once_committed(
    spark: Any, tmp_path: Path
) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    folder = tmp_path / "bronze"
    table = folder / "orders"
    (table / "_delta_log").mkdir(parents=True)  # a writer elsewhere, before its first commit
    assert not is_delta_table(str(table), spark)
    assert list_delta_tables(str(folder), spark) == []
    write_deltalake(str(table), pa.table({"x": [1, 2]}))  # another writer (delta-rs) commits
    assert is_delta_table(str(table), spark)
    assert [p.rsplit("/", 1)[-1] for p in list_delta_tables(str(folder), spark)] == ["orders"]
    assert spark.read.format("delta").load(str(table)).count() == 2
