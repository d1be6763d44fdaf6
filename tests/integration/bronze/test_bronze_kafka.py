"""Bronze against the real broker: every (topic, partition, offset) lands once, byte for byte."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from lakehouse.checkpoints import load_app_id, query_id
from lakehouse.layout import Layout
from pipelines import bronze
from pipelines.settings import load_config
from tests.support.bronze_itkit import Kafka, only, read_bronze, unique_prefix, write_config

pytestmark = pytest.mark.integration


def run_available_now(spark: Any, config_file: Path) -> dict[str, Any]:
    cfg = load_config(config_file)
    queries = bronze.run(cfg, trigger="available-now", spark=spark)
    assert all(not q.isActive for q in queries)
    return bronze.summarize(queries, cfg)


def single_table(name: str) -> str:
    """The ``[bronze]`` settings of one table ``name`` for every topic."""
    return f'[bronze]\ntable_mode = "single"\nsingle_table = "{name}"\n'


def test_per_topic_exactly_once_and_incremental(spark: Any, kafka: Kafka, tmp_path: Path) -> None:
    prefix = unique_prefix("pertopic")
    orders, users = f"{prefix}.orders", f"{prefix}.Users-v1"
    kafka.create_topics(orders, users)
    kafka.produce(orders, 40)
    kafka.produce(users, 25)
    lake = tmp_path / "lake"
    cfg_file = write_config(tmp_path / "c.toml", lake, kafka.bootstrap, topics=[orders, users])
    orders_table = lake / "bronze" / bronze.bronze_table_of_topic(orders)
    users_table = lake / "bronze" / bronze.bronze_table_of_topic(users)
    assert users_table.name == re.sub(r"[^a-z0-9_]", "_", users.lower())

    summary = run_available_now(spark, cfg_file)
    assert summary["records"] == 65
    got, count = read_bronze(spark, orders_table)
    assert count == 40 and got == only(kafka.expected, orders)
    got, count = read_bronze(spark, users_table)
    assert count == 25 and got == only(kafka.expected, users)

    # a second run finds nothing new and duplicates nothing
    assert run_available_now(spark, cfg_file)["records"] == 0
    assert read_bronze(spark, orders_table)[1] == 40

    # more records: only they land
    new = kafka.produce(orders, 15, start=40)
    assert run_available_now(spark, cfg_file)["records"] == 15
    got, count = read_bronze(spark, orders_table)
    assert count == 55 and got == only(kafka.expected, orders)
    assert set(new) <= set(got)
    got, count = read_bronze(spark, users_table)
    assert count == 25


def test_single_table_mode(spark: Any, kafka: Kafka, tmp_path: Path) -> None:
    prefix = unique_prefix("single")
    a, b = f"{prefix}.a", f"{prefix}.b"
    kafka.create_topics(a, b, partitions=3)
    kafka.produce(a, 30)
    kafka.produce(b, 12)
    lake = tmp_path / "lake"
    cfg_file = write_config(
        tmp_path / "c.toml", lake, kafka.bootstrap, topics=[a, b], extra=single_table("everything")
    )
    run_available_now(spark, cfg_file)
    got, count = read_bronze(spark, lake / "bronze" / "everything")
    assert count == 42 and got == kafka.expected
    assert sorted(p.name for p in (lake / "bronze").iterdir()) == ["everything"]
    kafka.produce(b, 5, start=12)
    run_available_now(spark, cfg_file)
    got, count = read_bronze(spark, lake / "bronze" / "everything")
    assert count == 47 and got == kafka.expected


def test_pattern_picks_up_a_new_topic(spark: Any, kafka: Kafka, tmp_path: Path) -> None:
    prefix = unique_prefix("pattern")
    first, second, outsider = f"{prefix}.first", f"{prefix}.second", f"{prefix}x.other"
    kafka.create_topics(first, outsider)
    kafka.produce(first, 20)
    kafka.produce(outsider, 5)
    lake = tmp_path / "lake"
    cfg_file = write_config(
        tmp_path / "c.toml",
        lake,
        kafka.bootstrap,
        pattern=re.escape(prefix) + r"\..*",
    )
    run_available_now(spark, cfg_file)
    assert sorted(p.name for p in (lake / "bronze").iterdir()) == [
        bronze.bronze_table_of_topic(first)
    ]
    kafka.create_topics(second)
    kafka.produce(second, 11)
    kafka.produce(first, 3, start=20)
    run_available_now(spark, cfg_file)
    got, count = read_bronze(spark, lake / "bronze" / bronze.bronze_table_of_topic(second))
    assert count == 11 and got == only(kafka.expected, second)
    got, count = read_bronze(spark, lake / "bronze" / bronze.bronze_table_of_topic(first))
    assert count == 23 and got == only(kafka.expected, first)
    assert not (lake / "bronze" / bronze.bronze_table_of_topic(outsider)).exists()


def test_max_offsets_per_trigger_splits_batches(spark: Any, kafka: Kafka, tmp_path: Path) -> None:
    topic = unique_prefix("limit")
    kafka.create_topics(topic, partitions=1)
    kafka.produce(topic, 50)
    lake = tmp_path / "lake"
    cfg_file = write_config(tmp_path / "c.toml", lake, kafka.bootstrap, topics=[topic])
    cfg_file.write_text(
        cfg_file.read_text().replace("[kafka]\n", "[kafka]\nmax_offsets_per_trigger = 20\n")
    )
    summary = run_available_now(spark, cfg_file)
    assert summary["batches"] == 3 and summary["records"] == 50
    got, count = read_bronze(spark, lake / "bronze" / bronze.bronze_table_of_topic(topic))
    assert count == 50 and got == kafka.expected


def test_aborted_transactions_never_reach_bronze(spark: Any, kafka: Kafka, tmp_path: Path) -> None:
    """A transactional producer commits some records and aborts others: bronze (with the
    default isolation level) holds exactly the committed ones and the plain ones, although the
    aborted records and the transaction markers leave offset gaps in every partition."""
    from confluent_kafka import Producer

    topic = unique_prefix("tx")
    kafka.create_topics(topic, partitions=2)
    aborted = Kafka(kafka.bootstrap)  # remembers what was written, then aborted
    tx = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"it-{topic}"})
    tx.init_transactions(30)
    start = 0

    def transaction(count: int, commit: bool) -> None:
        nonlocal start
        tx.begin_transaction()
        (kafka if commit else aborted).produce(topic, count, start=start, producer=tx)
        start += count
        if commit:
            tx.commit_transaction(30)
        else:
            tx.abort_transaction(30)

    for count, commit in ((5, True), (4, False), (6, True), (3, False)):
        transaction(count, commit)
    kafka.produce(topic, 4, start=start)  # plain records after the transactions
    start += 4
    assert len(aborted.expected) == 7

    lake = tmp_path / "lake"
    cfg_file = write_config(tmp_path / "c.toml", lake, kafka.bootstrap, topics=[topic])
    table = lake / "bronze" / bronze.bronze_table_of_topic(topic)
    assert run_available_now(spark, cfg_file)["records"] == 15
    got, count = read_bronze(spark, table)
    assert count == 15 and got == only(kafka.expected, topic)
    assert not set(aborted.expected) & set(got)

    # the next run starts after the markers and gaps: only the new committed records land
    transaction(2, False)
    transaction(3, True)
    assert run_available_now(spark, cfg_file)["records"] == 3
    got, count = read_bronze(spark, table)
    assert count == 18 and got == only(kafka.expected, topic)
    assert not set(aborted.expected) & set(got)


def test_a_single_table_is_named_in_the_catalog_before_its_first_batch(
    spark: Any, kafka: Kafka, tmp_path: Path
) -> None:
    prefix = unique_prefix("singlereg")
    topic = f"{prefix}.a"
    kafka.create_topics(topic)
    kafka.produce(topic, 8)
    cfg = load_config(
        write_config(
            tmp_path / "c.toml",
            tmp_path / "lake",
            kafka.bootstrap,
            topics=[topic],
            extra=single_table("landed")
            + 'processing_interval = "1 second"\n[catalog]\nbronze_database = "bronze"\n',
        )
    )
    queries = bronze.run(cfg, trigger="processing-time", await_termination=False, spark=spark)
    try:
        assert spark.catalog.tableExists("bronze.landed"), "named before its first batch"
        detail = spark.sql("DESCRIBE DETAIL bronze.landed").first()
        assert topic in detail["description"]
        deadline = time.monotonic() + 120
        while spark.table("bronze.landed").count() < 8 and time.monotonic() < deadline:
            time.sleep(0.5)
        got, count = read_bronze(spark, tmp_path / "lake" / "bronze" / "landed")
        assert count == 8 and got == kafka.expected
        assert all(q.isActive for q in queries)
    finally:
        for q in queries:
            q.stop()


def test_a_single_table_written_by_spark_s_delta_sink_goes_on_exactly_once(
    spark: Any, kafka: Kafka, tmp_path: Path
) -> None:
    """A single-table checkpoint that Spark's Delta sink wrote goes on under bronze's own
    appends: a batch the sink committed to the table, which a crash kept out of the commit
    log, is replayed and skipped (the appends name the sink's query id)."""
    prefix = unique_prefix("sinkcont")
    topic = f"{prefix}.a"
    kafka.create_topics(topic, partitions=2)
    kafka.produce(topic, 20)
    lake = tmp_path / "lake"
    cfg_file = write_config(
        tmp_path / "c.toml", lake, kafka.bootstrap, topics=[topic], extra=single_table("landed")
    )
    cfg = load_config(cfg_file)
    checkpoint, path = bronze.bronze_checkpoint(cfg), bronze.bronze_table_path(cfg, "landed")
    rows = bronze.to_bronze_rows(bronze.read_kafka(spark, cfg))
    sink = rows.writeStream.format("delta").option("checkpointLocation", checkpoint)
    sink.partitionBy("_ingest_date").trigger(availableNow=True).start(path).awaitTermination()
    assert read_bronze(spark, lake / "bronze" / "landed")[1] == 20
    commits = Path(Layout.commit_log(checkpoint))
    (last,) = [c for c in commits.iterdir() if c.name.isdigit()]
    last.unlink()  # the crash: the batch is in the table, not in the commit log
    (commits / f".{last.name}.crc").unlink(missing_ok=True)  # and Hadoop's checksum of it

    kafka.produce(topic, 5, start=20)
    assert run_available_now(spark, cfg_file)["records"] == 25  # the replay and the new five
    got, count = read_bronze(spark, lake / "bronze" / "landed")
    assert count == 25 and got == kafka.expected
    assert load_app_id(spark, checkpoint) == query_id(spark, checkpoint)
