"""The metrics listener on a real stream (Spark with Delta, no service): it receives each
progress as PySpark's own bridge would give it, read from the progress's JSON in one JVM call,
and records the query's micro-batch."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pipelines import metrics


def _recording_listener() -> tuple[Any, list[Any]]:
    seen: list[Any] = []

    class Recording(metrics.MetricsListener):
        def onQueryProgress(self, event: Any) -> None:  # noqa: N802 - Spark's callback names
            seen.append(event.progress)
            super().onQueryProgress(event)

    return Recording(), seen


def test_progress_events_arrive_as_pyspark_reads_them(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql.streaming.listener import StreamingQueryProgress

    source, sink = str(tmp_path / "source"), str(tmp_path / "sink")
    spark.range(5).write.format("delta").save(source)
    listener, seen = _recording_listener()
    spark.streams.addListener(listener)
    try:
        query = (
            spark.readStream.format("delta")
            .load(source)
            .writeStream.format("delta")
            .queryName("metrics_bridge_probe")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start(sink)
        )
        query.awaitTermination(120)
        jprogress = query._jsq.lastProgress()
        deadline = time.monotonic() + 60  # the listener bus delivers events asynchronously
        while not seen and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        spark.streams.removeListener(listener)
    assert seen, "no progress event reached the listener"
    got = seen[-1]
    assert got["batchId"] == jprogress.batchId() == 0
    # read from the JSON: PySpark's own bridge would have kept the JVM's object
    assert got._jprogress is None
    # what the listener records from: the JVM's JSON of the progress, unchanged
    assert json.loads(got.json) == json.loads(jprogress.json())
    # and the fields PySpark's field-by-field copy of the JVM's object has (rates aside: the
    # JSON rounds them to one decimal, as it does for Spark Connect's listeners)
    theirs = StreamingQueryProgress.fromJObject(jprogress)
    for field in ("id", "runId", "name", "timestamp", "batchId", "durationMs", "numInputRows"):
        assert got[field] == theirs[field], field
    assert [(s.description, s.numInputRows, json.loads(s.endOffset)) for s in got.sources] == [
        (s.description, s.numInputRows, json.loads(s.endOffset)) for s in theirs.sources
    ]
    assert got.sink.description == theirs.sink.description
    assert got.numInputRows == 5 and got.name == "metrics_bridge_probe"
