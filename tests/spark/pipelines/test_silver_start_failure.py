"""A silver run whose second query cannot start (another process runs its checkpoint) stops
the query it started first, raises, and leaves that query's checkpoint free: no query is left
running with no one to await it, and no lock outlives the failed run.

Real Spark and Delta, real ``flock`` held by another process; the bronze tables are empty, so
no batch needs the registry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakehouse.checkpoint_guard import CheckpointInUseError
from lakehouse.layout import Layout
from pipelines import silver
from pipelines.settings import parse_config
from tests.support.lock_holder import guard_in_another_process, hold_in_another_process
from tests.support.silver_testkit import write_bronze

FIRST, SECOND = "a_first", "b_second"  # the order silver starts them in (sorted)


@pytest.mark.parametrize("trigger", ["available-now", "processing-time"])
def test_a_query_that_cannot_start_stops_the_one_started_before(
    spark: Any, tmp_path: Path, trigger: str
) -> None:
    lake = tmp_path / "lake"
    layout = Layout(str(lake))
    for name in (FIRST, SECOND):
        write_bronze(spark, layout.bronze_table(name), [])
    cfg = parse_config(
        {
            "lakehouse": {"path": str(lake)},
            "kafka": {"bootstrap_servers": "127.0.0.1:9", "topics": ["unused"]},  # bronze only
            "registry": {"url": "http://127.0.0.1:9"},  # never asked: no record to resolve
            "silver": {"processing_interval": "1 second", "table_discovery_seconds": 1.0},
        }
    )
    first = Path(layout.checkpoint("silver", FIRST))
    holder = hold_in_another_process(Path(layout.checkpoint("silver", SECOND)))
    try:
        with pytest.raises(CheckpointInUseError, match=f"pid {holder.pid} "):
            silver.run(cfg, trigger, spark=spark, await_termination=False)
    finally:
        left_running = [q.name for q in spark.streams.active]
        for query in spark.streams.active:  # the session is shared: leave no query behind
            query.stop()
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)

    assert (first / "metadata").exists()  # the first query had started
    assert left_running == []
    freed = guard_in_another_process(first)
    assert freed.returncode == 0, freed.stderr
