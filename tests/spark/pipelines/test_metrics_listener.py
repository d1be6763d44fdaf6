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

        def ours() -> list[Any]:
            return [p for p in seen if str(p.runId) == str(query.runId)]

        deadline = time.monotonic() + 60  # the listener bus delivers events asynchronously
        while not ours() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        spark.streams.removeListener(listener)
    assert ours(), "no progress event of the query reached the listener"
    got = ours()[-1]
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


def test_a_progress_json_fromjson_cannot_read_is_copied_field_by_field(monkeypatch: Any) -> None:
    """Spark leaves a source's rates out of the JSON when they are not finite; PySpark's
    ``fromJson`` needs them. The listener then gets PySpark's field-by-field copy."""
    from pyspark.sql.streaming.listener import QueryProgressEvent

    source = {"description": "probe", "numInputRows": 0}
    source.update(startOffset=None, endOffset=None, latestOffset=None)
    progress = {
        "id": "00000000-0000-0000-0000-000000000001",
        "runId": "00000000-0000-0000-0000-000000000002",
        "name": "nan_rates",
        "timestamp": "2026-11-27T00:00:00.000Z",
        "batchId": 3,
        "batchDuration": 0,
        "durationMs": {"triggerExecution": 0},
        "stateOperators": [],
        "sources": [source],
        "sink": {"description": "probe", "numOutputRows": -1},
        "numInputRows": 0,
    }

    class JEvent:  # what the JVM hands the bridge, as far as the bridge reads it
        def progress(self) -> Any:
            return self

        def json(self) -> str:
            return json.dumps(progress)

    copied = object()  # stands for PySpark's copy of the JVM's object, which JEvent is not
    monkeypatch.setattr(QueryProgressEvent, "fromJObject", classmethod(lambda cls, j: copied))
    got: list[Any] = []
    listener, _ = _recording_listener()
    monkeypatch.setattr(listener, "onQueryProgress", got.append)
    bridge = metrics._json_progress_bridge()(listener)

    bridge.onQueryProgress(JEvent())
    assert got == [copied]

    source.update(inputRowsPerSecond=0.0, processedRowsPerSecond=0.0)  # finite rates: JSON
    bridge.onQueryProgress(JEvent())
    assert got[1] is not copied and got[1].progress.name == "nan_rates"
