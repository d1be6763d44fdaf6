"""Addresses of the local stack (``infra/stack.sh``) and a free port for servers a test starts.

Kafka is ``PROTOLAKE_KAFKA_BOOTSTRAP`` (default 127.0.0.1:9092), the schema registry
``PROTOLAKE_REGISTRY_URL`` (default http://127.0.0.1:8081). A stack that does not answer fails
the tests that need it (CI starts it; run ``infra/stack.sh up``): they never skip.
"""

from __future__ import annotations

import os
import socket
import urllib.request

import pytest

BOOTSTRAP = os.environ.get("PROTOLAKE_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
REGISTRY = os.environ.get("PROTOLAKE_REGISTRY_URL", "http://127.0.0.1:8081")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_kafka(bootstrap: str = BOOTSTRAP) -> str:
    """``bootstrap`` when the broker answers; fails the test otherwise."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15)
    except KafkaException as exc:
        pytest.fail(f"Kafka at {bootstrap} does not answer ({exc}); run `infra/stack.sh up`")
    return bootstrap


def check_registry(url: str = REGISTRY) -> str:
    """``url`` when the stack's schema registry answers; fails the test otherwise."""
    try:
        with urllib.request.urlopen(f"{url}/subjects", timeout=10) as response:
            response.read()
    except OSError as exc:
        pytest.fail(f"schema registry at {url} does not answer ({exc}); run `infra/stack.sh up`")
    return url
