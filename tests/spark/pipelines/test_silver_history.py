"""A silver query keeps its newest batches' stats (``SilverBatch.history``, bounded: a stream
runs for months) and the sums of all of them (``SilverBatch.totals``, what a run reports)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codec import SchemaResolver
from pipelines.silver import batch as silver_batch
from pipelines.silver.batch import SilverBatch
from pipelines.silver.job import SilverRun, summarize
from pipelines.silver.stats import BatchStats, RunTotals
from tests.support.codec_test_support import MemoryRegistry
from tests.support.silver_testkit import BRONZE_DDL, bronze_row


def test_history_keeps_the_newest_batches_and_totals_count_them_all(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(silver_batch, "HISTORY_KEPT", 2)
    batch = SilverBatch(spark, str(tmp_path / "lake"), "app", SchemaResolver(MemoryRegistry()))
    batches = [
        [bronze_row(b"not framed", "t", 0), bronze_row(b"{}", "t", 1)],
        [],
        [bronze_row(b"x", "t", 2)],
        [],
    ]
    for batch_id, rows in enumerate(batches):
        batch(spark.createDataFrame(rows, BRONZE_DDL), batch_id)
    assert [s.batch_id for s in batch.history] == [2, 3]
    totals = batch.totals
    assert (totals.batches, totals.records, totals.quarantined) == (4, 3, {"BAD_MAGIC": 3})


def test_a_runs_summary_sums_its_queries_totals() -> None:
    first, second = RunTotals(), RunTotals()
    first.add(BatchStats(0, records=5, silver={"a": 4}, quarantined={"BAD_MAGIC": 1}))
    first.add(BatchStats(1, records=2, silver={"b": 2}))
    second.add(BatchStats(0, records=3, silver={"a": 1}, quarantined={"BAD_MAGIC": 2, "X": 1}))

    class Query:
        def __init__(self, totals: RunTotals) -> None:
            self.totals = totals

    run = SilverRun(batches=[Query(first), Query(second)])  # type: ignore[list-item]
    summary = summarize(run, _config())
    assert (summary["batches"], summary["records"]) == (3, 10)
    assert summary["quarantined"] == {"BAD_MAGIC": 3, "X": 1}
    assert summary["tables"] == ["a", "b"]


def _config() -> Any:
    from pipelines.settings import parse_config

    return parse_config({"kafka": {"bootstrap_servers": "b:9092", "topics": ["t"]}})
