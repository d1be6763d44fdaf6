"""pipelines.silver.tables.write_partitions: an append that one task holds is written by one
task; a larger one keeps its partitions (coalescing would merge them by count, not rows)."""

from __future__ import annotations

from typing import Any

from pipelines.silver.tables import ROWS_PER_WRITE_TASK, write_partitions


def test_a_small_append_is_one_partition_a_large_one_keeps_its_own(spark: Any) -> None:
    parts = spark.range(0, 40, numPartitions=4).union(spark.range(40, 60, numPartitions=3))
    assert parts.rdd.getNumPartitions() == 7

    assert write_partitions(parts, 0).rdd.getNumPartitions() == 1
    small = write_partitions(parts, ROWS_PER_WRITE_TASK)
    assert small.rdd.getNumPartitions() == 1
    assert sorted(r[0] for r in small.collect()) == list(range(60))
    assert write_partitions(parts, ROWS_PER_WRITE_TASK + 1).rdd.getNumPartitions() == 7
