"""A new stream reads a young Delta table from its version 0 and an older one (or one whose log
has a checkpoint) from a snapshot; both give every row once (``lakehouse.delta_stream``).

Which way a stream read is seen from the files it reads: after a compaction (a commit that
rewrites the table's files without changing its data), the commits from version 0 name the
files written first, a snapshot the compacted ones. Each test removes the files the other way
would need, so a stream read the wrong way fails."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakehouse.delta_stream import YOUNG_TABLE_SECONDS, read_delta_stream, reads_from_first_version


def _table(folder: Path, appends: int = 3) -> Path:
    table = folder / "bronze_t"
    for i in range(appends):
        write_deltalake(str(table), pa.table({"x": [10 * i, 10 * i + 1]}), mode="append")
    return table


def _rows_of_a_new_stream(spark: Any, table: Path, checkpoint: Path) -> list[int]:
    """The rows a new available-now query reads."""
    seen: list[int] = []
    query = (
        read_delta_stream(spark, str(table))
        .writeStream.foreachBatch(lambda df, _: seen.extend(r.x for r in df.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return sorted(seen)


def _compacted(table: Path) -> tuple[set[Path], set[Path]]:
    """Compact the table; the files written first and the compacted ones."""
    first = {Path(u.removeprefix("file://")) for u in DeltaTable(str(table)).file_uris()}
    DeltaTable(str(table)).optimize.compact()
    now = {Path(u.removeprefix("file://")) for u in DeltaTable(str(table)).file_uris()}
    assert first and now and not first & now
    return first, now


def _age_first_commit(table: Path, seconds: float) -> None:
    first = table / "_delta_log" / "00000000000000000000.json"
    then = time.time() - seconds
    os.utime(first, (then, then))


def test_a_young_table_is_read_from_its_first_version(spark: Any, tmp_path: Path) -> None:
    table = _table(tmp_path)
    _, compacted = _compacted(table)
    for path in compacted:
        path.unlink()  # a snapshot would need them
    assert reads_from_first_version(spark, str(table))
    assert _rows_of_a_new_stream(spark, table, tmp_path / "ck") == [0, 1, 10, 11, 20, 21]


@pytest.mark.parametrize("why", ["checkpointed", "old"])
def test_other_tables_are_read_from_a_snapshot(spark: Any, tmp_path: Path, why: str) -> None:
    table = _table(tmp_path)
    written_first, _ = _compacted(table)
    for path in written_first:
        path.unlink()  # as a VACUUM does: reading from version 0 would need them
    if why == "checkpointed":
        DeltaTable(str(table)).create_checkpoint()
    else:
        _age_first_commit(table, YOUNG_TABLE_SECONDS + 60)
    assert not reads_from_first_version(spark, str(table))
    assert _rows_of_a_new_stream(spark, table, tmp_path / "ck") == [0, 1, 10, 11, 20, 21]


def test_a_missing_table_is_not_young(spark: Any, tmp_path: Path) -> None:
    assert not reads_from_first_version(spark, str(tmp_path / "nothing"))
