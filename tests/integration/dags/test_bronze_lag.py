"""The bronze lag of the DAGs' probe and of the ingest DAG's "caught up" check, against the
real broker: records beyond the checkpoint's offsets, in its topics and in the subscribed ones
it has not read yet; offsets that went back are no lag; transactions are seen as bronze
reads them (read_committed unless the configuration says otherwise). And the partition
watermarks that the lag, ``protolake status`` and the demo's topic counts are read from."""

from __future__ import annotations

import re
import time
from functools import partial

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from protolake_support.progress import CheckpointProgress, LagUnknownError, bronze_lag

from pipelines.settings import parse_config
from pipelines.settings.clients import partition_watermarks, subscribed_topics
from tests.support.bronze_itkit import Kafka

pytestmark = pytest.mark.integration


def checkpoint(offsets: dict[str, dict[str, int]]) -> CheckpointProgress:
    """A checkpoint whose last batch (committed) planned ``offsets``."""
    return CheckpointProgress("cp", 0, 0, 1.0, {"sources": [offsets]})


def subscription(bootstrap: str, **kafka: object) -> partial[set[str]]:
    cfg = parse_config({"kafka": {"bootstrap_servers": bootstrap, **kafka}})
    return partial(subscribed_topics, cfg)


def test_topics_the_checkpoint_has_not_read_count_from_their_start(
    bootstrap: str, topic_prefix: str
) -> None:
    kafka = Kafka(bootstrap)
    own = f"{topic_prefix}subscribed."  # the module's other tests make topics too
    read, unread = f"{own}read", f"{own}unread"
    kafka.create_topics(read, unread, partitions=1)
    kafka.produce(read, 5)
    kafka.produce(unread, 3)
    progress = checkpoint({read: {"0": 5}})  # its last batch took the 5 records of one topic

    def lag(**kafka_settings: object) -> int:
        subscribed = subscription(bootstrap, **kafka_settings) if kafka_settings else None
        return bronze_lag(progress, bootstrap, {}, subscribed)

    assert lag() == 0  # the checkpoint's topics only
    assert lag(topics=[read]) == 0
    assert lag(topics=[read, unread]) == 3
    assert lag(topics=[read, unread, f"{own}not-yet"]) == 3
    assert lag(topic_pattern=re.escape(own) + ".*") == 3
    assert lag(topic_pattern=re.escape(own)) == 0  # no whole name matches
    kafka.produce(read, 2, start=5)
    assert lag() == 2
    assert lag(topics=[read, unread]) == 5


def test_offsets_that_went_back_or_a_topic_that_is_gone_are_no_lag(
    bootstrap: str, topic_prefix: str
) -> None:
    kafka = Kafka(bootstrap)
    topic = f"{topic_prefix}short"
    kafka.create_topics(topic, partitions=1)
    kafka.produce(topic, 2)
    beyond = checkpoint({topic: {"0": 9}})  # read up to 9 of a topic that now ends at 2
    with pytest.raises(LagUnknownError, match=r"\[0\] ends at 2, before 9"):
        bronze_lag(beyond, bootstrap, {})
    gone = checkpoint({f"{topic_prefix}deleted": {"0": 4}})
    with pytest.raises(LagUnknownError, match="deleted is not readable"):
        bronze_lag(gone, bootstrap, {})
    # gone, and still matching the subscription's pattern
    pattern = subscription(bootstrap, topic_pattern=re.escape(topic_prefix) + ".*")
    with pytest.raises(LagUnknownError, match="deleted is not readable"):
        bronze_lag(gone, bootstrap, {}, pattern)


def test_transactions_count_as_bronze_reads_them(bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}txn"
    Kafka(bootstrap).create_topics(topic, partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"%d" % i)
    producer.commit_transaction(30)  # offsets 0-2, and the commit marker at 3
    # the broker answers the commit before it writes the marker: wait until readers see it
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "protolake-test"})
    deadline = time.monotonic() + 60
    while reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] < 4:
        assert time.monotonic() < deadline, "the commit marker was never written"
        time.sleep(0.1)
    reader.close()
    caught_up = checkpoint({topic: {"0": 4}})  # where Spark's read_committed read ends
    assert bronze_lag(caught_up, bootstrap, {}) == 0
    assert bronze_lag(checkpoint({topic: {"0": 0}}), bootstrap, {}) == 4

    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, value=b"open %d" % i)
    producer.flush(30)  # written, not committed: read_committed stops before them
    try:
        assert bronze_lag(caught_up, bootstrap, {}) == 0
        uncommitted = {"isolation.level": "read_uncommitted"}
        assert bronze_lag(caught_up, bootstrap, uncommitted) == 2
    finally:
        producer.abort_transaction(30)


def test_partition_watermarks_cover_every_partition_of_the_readable_topics(
    bootstrap: str, topic_prefix: str
) -> None:
    kafka = Kafka(bootstrap)
    two, one = f"{topic_prefix}two", f"{topic_prefix}one"
    kafka.create_topics(two, partitions=2)
    kafka.create_topics(one, partitions=1)
    kafka.produce(one, 4)
    kafka.produce(two, 6)  # acknowledged: the broker has the topic
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic_prefix}marks"})
    try:
        meta = consumer.list_topics(timeout=10)
        marks = partition_watermarks(consumer, meta, [two, one, f"{topic_prefix}absent"])
    finally:
        consumer.close()
    assert sorted(marks) == [(one, 0), (two, 0), (two, 1)]  # the absent topic is left out
    assert marks[(one, 0)] == (0, 4)
    assert marks[(two, 0)][0] == marks[(two, 1)][0] == 0
    assert marks[(two, 0)][1] + marks[(two, 1)][1] == 6
