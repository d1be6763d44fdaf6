"""The Arrow byte limit a silver batch runs with, by its largest record and the launch's
limits. The bound itself (``record_bytes``) and the limit reaching a real query's session are
tested in ``tests/integration/silver_batch/test_arrow_batches.py``."""

from __future__ import annotations

import pytest

from pipelines.silver.arrow_batches import MAX_BYTES, UNBOUNDED, ArrowBatches

MB64 = 64 * 2**20


def limit(max_records: int, max_bytes: int, largest: int | None) -> int:
    choice = ArrowBatches(None, max_records, max_bytes).settings_for(largest)  # type: ignore[arg-type]
    assert list(choice) == [MAX_BYTES]
    return int(choice[MAX_BYTES])


def test_the_byte_limit_is_off_only_where_the_record_limit_ends_every_batch_first() -> None:
    largest_below = MB64 // 10_000  # 6,710 bytes: 10,000 of them stay under 64 MB
    assert limit(10_000, MB64, largest_below) == UNBOUNDED
    assert limit(10_000, MB64, largest_below + 1) == MB64
    assert limit(10_000, MB64, 1) == UNBOUNDED
    assert limit(1, MB64, MB64) == UNBOUNDED  # one record a batch: it is the batch


@pytest.mark.parametrize("max_records", [0, -1])
def test_without_a_record_limit_the_byte_limit_stays(max_records: int) -> None:
    assert limit(max_records, MB64, 100) == MB64


def test_a_batch_of_unknown_size_keeps_the_launch_limit() -> None:
    assert limit(10_000, MB64, None) == MB64
    assert limit(10_000, 1000, None) == 1000  # a launch's own limit, not Spark's default
