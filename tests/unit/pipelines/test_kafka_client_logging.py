"""The confluent-kafka clients of the commands log through Python's logging
(``clients.client_logging``), not librdkafka's own lines on stderr."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pipelines.log_names import KAFKA_CLIENT_LOGGER

PROBE = """
import logging, sys
from confluent_kafka import Consumer, KafkaException
from pipelines.cli import configure_logging
from pipelines.settings.clients import client_logging
configure_logging(verbose=sys.argv[1] == "-v")
extra = client_logging() if sys.argv[2] == "routed" else {}
consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "probe", **extra})
try:
    consumer.list_topics(timeout=3)
except KafkaException:
    pass
consumer.poll(0.5)
consumer.close()
"""


def _stderr(verbose: str, routing: str) -> str:
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE), verbose, routing],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return run.stderr


@pytest.mark.parametrize("verbose", ["-q", "-v"])
def test_an_unreachable_broker_prints_lines_only_when_asked(verbose: str) -> None:
    assert "127.0.0.1:1" in _stderr(verbose, "stderr")  # librdkafka's own lines, unrouted
    routed = _stderr(verbose, "routed")
    if verbose == "-v":
        assert f"{KAFKA_CLIENT_LOGGER}:" in routed and "127.0.0.1:1" in routed
    else:
        assert "127.0.0.1:1" not in routed
