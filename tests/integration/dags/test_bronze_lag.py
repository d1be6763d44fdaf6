"""The bronze lag of the DAGs' probe and of the ingest DAG's "caught up" check, against the
real broker: records beyond the checkpoint's offsets, in its topics and in the subscribed
ones it has not read yet (a topic list, or a pattern matched against whole names)."""

from __future__ import annotations

import re

import pytest
from protolake_support.progress import CheckpointProgress, bronze_lag

from tests.support.bronze_itkit import Kafka

pytestmark = pytest.mark.integration


def test_topics_the_checkpoint_has_not_read_count_from_their_start(
    bootstrap: str, topic_prefix: str
) -> None:
    kafka = Kafka(bootstrap)
    read, unread = f"{topic_prefix}read", f"{topic_prefix}unread"
    kafka.create_topics(read, unread, partitions=1)
    kafka.produce(read, 5)
    kafka.produce(unread, 3)
    # the checkpoint's last batch planned the 5 records of one topic
    progress = CheckpointProgress("cp", 0, 0, 1.0, {"sources": [{read: {"0": 5}}]})

    def lag(**subscription: object) -> int:
        return bronze_lag(progress, bootstrap, {}, **subscription)  # type: ignore[arg-type]

    assert lag() == 0
    assert lag(topics=[read]) == 0
    assert lag(topics=[read, unread]) == 3
    assert lag(topic_pattern=re.escape(topic_prefix) + ".*") == 3
    assert lag(topic_pattern=re.escape(unread)) == 3
    assert lag(topic_pattern=re.escape(topic_prefix)) == 0  # a prefix is not a whole name
    kafka.produce(read, 2, start=5)
    assert lag() == 2
    assert lag(topics=[read, unread]) == 5
