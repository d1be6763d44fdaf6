"""Silver follows bronze as it grows: started first, it waits; each bronze table that appears
while it runs (a new topic under ``kafka.topic_pattern``) gets its own query, no restart.

Real Kafka, the registry test server of this folder, the real bronze and silver jobs in the
session's Spark; the demo stream producer writes the records.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F  # noqa: N812

from lakehouse.layout import Layout
from lakehouse.tables import is_delta_table
from pipelines import bronze, silver
from pipelines.demo.produce import produce_demo_stream
from pipelines.quarantine import check_invariant
from pipelines.settings import ProtolakeConfig, parse_config
from pipelines.silver.cli import _print_summary
from tests.support.silver_itkit import (
    bronze_partition_counts,
    kafka_partition_counts,
    silver_counts,
    unique_prefix,
    wait_for,
)
from tests.support.stack import BOOTSTRAP

pytestmark = pytest.mark.integration


def _config(lake: Path, pattern: str, registry_url: str) -> ProtolakeConfig:
    return parse_config(
        {
            "lakehouse": {"path": str(lake)},
            "kafka": {"bootstrap_servers": BOOTSTRAP, "topic_pattern": pattern},
            # a registry answer may take seconds while the suite loads both cores: a timeout
            # there would fail the batch and stop its query (no outage is tested here)
            "registry": {"url": registry_url, "max_retries": 3, "timeout_seconds": 15.0},
            "catalog": {"silver_database": "silver_follow_it"},
            "silver": {
                "processing_interval": "1 second",
                "table_discovery_seconds": 1.0,
            },
        }
    )


def _silver_reached(spark: Any, lake: str, result: Any, expected: dict[str, int]) -> bool:
    """Whether silver holds ``expected`` rows per message type; a run whose watcher or query
    failed fails the test at once, with the failure."""
    failed = [q for q in result.queries if not q.isActive and q.exception() is not None]
    if failed:
        raise AssertionError(f"silver's query {failed[0].name} failed: {failed[0].exception()}")
    if result.group.error is not None:
        raise AssertionError(f"silver's table watcher failed: {result.group.error!r}")
    quarantined = _quarantined(spark, lake)
    if quarantined:  # the stream has no poison records
        raise AssertionError(f"records quarantined: {quarantined}")
    return silver_counts(spark, lake) == expected


def _quarantined(spark: Any, lake: str) -> dict[str, str]:
    """Each reason code in quarantine, with one of its reasons."""
    path = Layout(lake).quarantine
    if not is_delta_table(path, spark):
        return {}
    rows = spark.read.format("delta").load(path).groupBy("reason_code").agg(F.min("reason"))
    return {r[0]: r[1] for r in rows.collect()}


def _what_silver_did(spark: Any, lake: str, result: Any) -> str:
    """Rows per message type, bronze = silver + quarantine and each query's state, for a
    timeout."""
    queries = [
        f"{q.name}: active={q.isActive} status={q.status} batches={len(q.recentProgress)}"
        for q in result.queries
    ]
    try:
        invariant = check_invariant(spark, lake, while_running=True).summary()
    except Exception as exc:  # noqa: BLE001 - the timeout's message matters more
        invariant = f"invariant not read: {exc!r}"
    return (
        f"silver {silver_counts(spark, lake)}; {invariant}; "
        f"watcher saw {sorted(result.watcher.seen)}, queries {queries}"
    )


def _assert_bronze_holds_kafka(spark: Any, lake: str, topics: list[str]) -> None:
    """An available-now bronze run took every record its topics held when it started."""
    in_kafka = kafka_partition_counts(topics)
    assert sum(in_kafka.values()) > 0
    assert bronze_partition_counts(spark, lake) == in_kafka


@pytest.mark.timeout(900)
def test_silver_started_first_waits_then_takes_each_new_bronze_table(
    bootstrap: str, registry: Any, spark: Any, tmp_path: Path
) -> None:
    # a topic of each demo stream under the pattern (orders, then customers: another message
    # type, so another silver table); each topic more would be a query more to wait for
    root = unique_prefix("follow")
    first_topic, second_topic = f"{root}a.orders", f"{root}b.customers"
    pattern = re.escape(root) + r"(a\.orders|b\.customers)"
    cfg = _config(tmp_path / "lake", pattern, registry.url)
    lake = cfg.lakehouse_path
    result = silver.run(cfg, "processing-time", spark=spark, await_termination=False)
    try:
        time.sleep(2)  # a few polls of an empty lakehouse: silver waits, it does not end
        assert result.queries == [] and not result.group.stopping
        assert result.watcher is not None and result.watcher.seen == set()

        first = produce_demo_stream(
            bootstrap, registry.url, topic_prefix=f"{root}a.", records=40, poison_every=0
        ).on_topics([first_topic])
        bronze.run(cfg, trigger="available-now", spark=spark)
        _assert_bronze_holds_kafka(spark, lake, [first_topic])
        wait_for(
            lambda: _silver_reached(spark, lake, result, first.per_message_type),
            300,
            f"the first topic's rows in silver ({first.per_message_type})",
            lambda: _what_silver_did(spark, lake, result),
        )
        assert len(result.queries) == len(first.topics)

        # a new topic under the pattern: bronze creates its table while silver runs
        second = produce_demo_stream(
            bootstrap, registry.url, topic_prefix=f"{root}b.", records=40, poison_every=0
        ).on_topics([second_topic])
        assert not set(first.per_message_type) & set(second.per_message_type)
        bronze.run(cfg, trigger="available-now", spark=spark)
        _assert_bronze_holds_kafka(spark, lake, [first_topic, second_topic])
        both = dict(Counter(first.per_message_type) + Counter(second.per_message_type))
        wait_for(
            lambda: _silver_reached(spark, lake, result, both),
            300,
            f"the new topic's rows ({both})",
            lambda: _what_silver_did(spark, lake, result),
        )
        assert len(result.queries) == len(first.topics) + len(second.topics)
        assert all(q.isActive for q in result.queries)
    finally:
        result.group.stop()
    result.group.await_all(poll_seconds=0.2)  # stopped on request: no failure to raise
    assert not any(q.isActive for q in result.queries)
    report = check_invariant(spark, lake)
    assert report.holds, report.summary()
    assert report.bronze_records == first.records + second.records


@pytest.mark.timeout(300)
def test_available_now_before_bronze_says_there_is_nothing_to_take(
    registry: Any, spark: Any, tmp_path: Path
) -> None:
    cfg = _config(tmp_path / "lake", r"it\.silver\.none\..*", registry.url)
    result = silver.run(cfg, "available-now", spark=spark)
    assert result.queries == [] and result.missing == []
    named = silver.run(cfg, "available-now", spark=spark, bronze_table_names=["absent"])
    assert named.queries == [] and named.missing == ["absent"]
    lines: list[str] = []
    summary = silver.summarize(named, cfg) | {"seconds": 0.1}
    _print_summary(summary, as_json=False, out=lines.append)
    assert lines == [
        f"silver: nothing to take: no bronze table absent under {Layout(cfg.lakehouse_path).bronze} yet"
    ]
