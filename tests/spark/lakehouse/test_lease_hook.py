"""The ``on_lost`` hook of the streaming jobs stops every query of the session."""

from __future__ import annotations

from typing import Any

from lakehouse.lease import stop_streams_on_loss


def test_losing_the_lease_stops_the_sessions_queries(spark: Any) -> None:
    queries = [
        spark.readStream.format("rate").load().writeStream.format("noop").start() for _ in range(2)
    ]
    try:
        assert all(q.isActive for q in queries)
        stop_streams_on_loss(spark)("the writer lease is no longer this driver's")
        assert not any(q.isActive for q in queries)
        assert all(q.exception() is None for q in queries)
    finally:
        for q in queries:
            q.stop()
