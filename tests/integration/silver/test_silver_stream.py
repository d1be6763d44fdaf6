"""Silver on real Kafka + bronze: the demo stream, a registry outage, SIGKILL and restart.

Every test produces its own topics with the demo stream producer (confluent-kafka's real
ProtobufSerializer), lands them (or the one it configures) with the real bronze job and runs
the real silver job.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lakehouse.layout import Layout
from lakehouse.tables import list_delta_tables
from pipelines import bronze, silver
from pipelines.demo.produce import produce_demo_stream
from pipelines.naming import table_name_for
from pipelines.quarantine import check_invariant
from tests.support.silver_itkit import (
    ROOT,
    bronze_partition_counts,
    kafka_partition_counts,
    make_config,
    silver_counts,
    unique_prefix,
    wait_for,
    write_config_file,
)

pytestmark = pytest.mark.integration


def _quarantine_by_reason(spark: Any, lake: str) -> dict[str, int]:
    if not list_delta_tables(f"{lake}/quarantine", spark):
        return {}
    rows = spark.read.format("delta").load(Layout(lake).quarantine).groupBy("reason_code").count()
    return {r["reason_code"]: int(r["count"]) for r in rows.collect()}


def _add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return dict(Counter(a) + Counter(b))


@pytest.mark.timeout(2400)  # Spark on a shared 2-core machine: minutes, not seconds
def test_demo_stream_every_record_once_with_its_reason(
    bootstrap: str, registry: Any, spark: Any, tmp_path: Path
) -> None:
    summary = produce_demo_stream(
        bootstrap, registry.url, topic_prefix=unique_prefix("demo"), records=350, poison_every=10
    )
    assert set(summary.poison_by_reason) >= {
        "BAD_MAGIC",
        "UNKNOWN_SCHEMA",
        "TRUNCATED",
        "EMPTY_VALUE",
        "BAD_PAYLOAD",
    }
    cfg = make_config(tmp_path / "lake", summary.topics, registry.url)
    lake = cfg.lakehouse_path
    # every acknowledged record is readable (read committed) before bronze starts; a timeout
    # names what Kafka held per topic against what the producer had acknowledged
    seen: dict[str, int] = {}

    def every_record_committed() -> bool:
        seen.clear()
        for (topic, _), n in kafka_partition_counts(summary.topics).items():
            seen[topic] = seen.get(topic, 0) + n
        return sum(seen.values()) == summary.records

    wait_for(
        every_record_committed,
        180,
        f"{summary.records} committed records in {summary.topics}",
        lambda: f"Kafka holds {seen}, the producer acknowledged {summary.per_topic}",
    )
    in_kafka = kafka_partition_counts(summary.topics)
    bronze.run(cfg, trigger="available-now", spark=spark)
    # every partition's records, each once (the diff names a partition bronze fell short of)
    assert bronze_partition_counts(spark, lake) == in_kafka, (
        f"Kafka after the run: {kafka_partition_counts(summary.topics)}"
    )
    registry.handle.clear_requests()

    result = silver.run(cfg, trigger="available-now", spark=spark)

    report = check_invariant(spark, lake)
    assert report.holds, report.summary() + f" {report.offenders}"
    assert report.bronze_records == summary.records
    assert _quarantine_by_reason(spark, lake) == summary.expected_quarantine_by_reason(
        quarantine_rules=()
    )
    assert silver_counts(spark, lake) == summary.per_message_type
    for message_type in summary.per_message_type:  # one table per type, named by the rule
        assert Path(lake, "silver", table_name_for(message_type), "_delta_log").is_dir()
    # the registry was asked once per schema (and its references), never per record
    asked = Counter(path for method, path in registry.handle.requests if method == "GET")
    schema_gets = {p: n for p, n in asked.items() if p.startswith("/schemas/")}
    known = {f"/schemas/ids/{i}" for ids in summary.schema_ids_by_type.values() for i in ids}
    known |= {f"/schemas/guids/{g}" for gs in summary.schema_guids_by_type.values() for g in gs}
    assert known <= set(schema_gets)
    assert all(schema_gets[p] == 1 for p in known), schema_gets
    assert sum(asked.values()) < summary.records / 5
    # the summary of the run agrees with the tables
    s = silver.summarize(result, cfg)
    assert s["records"] == summary.records
    assert s["quarantined"] == summary.expected_quarantine_by_reason(quarantine_rules=())

    # a second run finds nothing new and changes nothing
    silver.run(cfg, trigger="available-now", spark=spark)
    assert check_invariant(spark, lake).holds
    assert silver_counts(spark, lake) == summary.per_message_type

    # another engine reads the same tables by path: delta-rs (the `deltalake` package)
    from deltalake import DeltaTable

    for path in list_delta_tables(f"{lake}/silver", spark) + [Layout(lake).quarantine]:
        local = path.removeprefix("file:")
        ours = spark.read.format("delta").load(path)
        table = DeltaTable(local)
        assert {f.name for f in table.schema().fields} == set(ours.columns), local
        theirs = table.to_pyarrow_table(columns=["_kafka_topic", "_kafka_offset"]).to_pydict()
        pairs = ours.select("_kafka_topic", "_kafka_offset").collect()
        assert sorted(zip(theirs["_kafka_topic"], theirs["_kafka_offset"], strict=True)) == sorted(
            (r[0], r[1]) for r in pairs
        ), local


@pytest.mark.timeout(2400)
def test_registry_outage_fails_the_batch_and_quarantines_nothing(
    bootstrap: str, registry: Any, spark: Any, tmp_path: Path
) -> None:
    # one topic (orders: two message types, schema v1 then v2): an outage is the same for
    # any number of tables, and each one more costs every silver run its own query
    prefix = unique_prefix("outage")
    orders = [f"{prefix}orders"]
    first = produce_demo_stream(
        bootstrap, registry.url, topic_prefix=prefix, records=80, seed=1, poison_every=0
    ).on_topics(orders)
    assert len(first.per_message_type) == 2
    cfg = make_config(tmp_path / "lake", orders, registry.url)
    lake = cfg.lakehouse_path
    bronze.run(cfg, trigger="available-now", spark=spark)
    silver.run(cfg, trigger="available-now", spark=spark)
    assert silver_counts(spark, lake) == first.per_message_type

    second = produce_demo_stream(
        bootstrap, registry.url, topic_prefix=prefix, records=80, seed=2, poison_every=0
    ).on_topics(orders)
    bronze.run(cfg, trigger="available-now", spark=spark)
    registry.stop()  # mid-stream: bronze has records silver has not seen
    try:
        with pytest.raises(Exception, match="REGISTRY_UNAVAILABLE|RegistryUnavailable|registry"):
            silver.run(cfg, trigger="available-now", spark=spark)
        assert _quarantine_by_reason(spark, lake) == {}
        assert silver_counts(spark, lake) == first.per_message_type
    finally:
        registry.start()

    silver.run(cfg, trigger="available-now", spark=spark)
    report = check_invariant(spark, lake)
    assert report.holds, report.summary()
    assert _quarantine_by_reason(spark, lake) == {}
    assert silver_counts(spark, lake) == _add(first.per_message_type, second.per_message_type)


@pytest.mark.timeout(3000)
def test_sigkill_of_a_processing_time_job_then_restart(
    bootstrap: str, registry: Any, spark: Any, tmp_path: Path
) -> None:
    # one topic (orders, with poison records): exactly once after a kill is a property of
    # each query, and each table more is a query more in the killed process and the restart
    prefix = unique_prefix("kill")
    orders = [f"{prefix}orders"]
    first = produce_demo_stream(
        bootstrap, registry.url, topic_prefix=prefix, records=100, seed=3, poison_every=10
    ).on_topics(orders)
    lake_dir = tmp_path / "lake"
    cfg = make_config(lake_dir, orders, registry.url, processing_interval="2 seconds")
    config = write_config_file(
        tmp_path / "silver.toml",
        lake_dir,
        orders,
        registry.url,
        processing_interval="2 seconds",
    )
    bronze.run(cfg, trigger="available-now", spark=spark)
    commits = Path(cfg.lakehouse_path, "_checkpoints", "silver")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    log = (tmp_path / "silver.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipelines.silver",
            "--config",
            str(config),
            "--trigger",
            "processing-time",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: any(commits.glob("*/commits/0")), 600, "a first committed silver batch")
        second = produce_demo_stream(
            bootstrap, registry.url, topic_prefix=prefix, records=100, seed=4, poison_every=10
        ).on_topics(orders)
        assert second.poison_by_reason, "the batch the kill interrupts holds poison records too"
        bronze.run(cfg, trigger="available-now", spark=spark)
        # kill as soon as the next batch has started (its offsets are logged, not committed)
        wait_for(lambda: any(commits.glob("*/offsets/1")), 600, "a second silver batch")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        log.close()
    assert proc.returncode == -signal.SIGKILL

    silver.run(cfg, trigger="available-now", spark=spark)
    report = check_invariant(spark, cfg.lakehouse_path)
    assert report.holds, report.summary() + f" {report.offenders}"
    assert report.bronze_records == first.records + second.records
    assert silver_counts(spark, cfg.lakehouse_path) == _add(
        first.per_message_type, second.per_message_type
    )
    expected_q = _add(
        first.expected_quarantine_by_reason(quarantine_rules=()),
        second.expected_quarantine_by_reason(quarantine_rules=()),
    )
    assert _quarantine_by_reason(spark, cfg.lakehouse_path) == expected_q
    # tables are registered by name in the catalog
    some_type = sorted(first.per_message_type)[0]
    n = spark.sql(f"SELECT count(*) FROM silver.{table_name_for(some_type)}").first()[0]
    assert n == silver_counts(spark, cfg.lakehouse_path)[some_type]
