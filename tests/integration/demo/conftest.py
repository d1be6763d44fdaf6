"""Fixtures of the demo's integration tests: the real local stack (infra/stack.sh: Kafka and
the schema registry), unique topic prefixes, and clean-up of what a test created.

Addresses come from PROTOLAKE_KAFKA_BOOTSTRAP / PROTOLAKE_REGISTRY_URL (defaults 127.0.0.1:9092
and http://127.0.0.1:8081). A stack that does not answer fails the tests (never skips them).
"""

from __future__ import annotations

import os
import urllib.request
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

BOOTSTRAP = os.environ.get("PROTOLAKE_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
REGISTRY = os.environ.get("PROTOLAKE_REGISTRY_URL", "http://127.0.0.1:8081")


@pytest.fixture(scope="session")
def bootstrap() -> str:
    try:
        AdminClient({"bootstrap.servers": BOOTSTRAP}).list_topics(timeout=15)
    except KafkaException as exc:
        pytest.fail(f"Kafka at {BOOTSTRAP} does not answer ({exc}); run `infra/stack.sh up`")
    return BOOTSTRAP


@pytest.fixture(scope="session")
def registry_url() -> str:
    try:
        with urllib.request.urlopen(f"{REGISTRY}/subjects", timeout=10) as response:
            response.read()
    except OSError as exc:
        pytest.fail(
            f"schema registry at {REGISTRY} does not answer ({exc}); run `infra/stack.sh up`"
        )
    return REGISTRY


def remove_demo_topics_and_subjects(bootstrap: str, registry_url: str, prefix: str) -> None:
    """Delete the topics and subjects under ``prefix`` (shared references stay)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    if topics:
        for future in admin.delete_topics(topics, operation_timeout=30).values():
            future.result(timeout=60)
    client = SchemaRegistryClient({"url": registry_url})
    for subject in client.get_subjects():
        if subject.startswith(prefix):
            client.delete_subject(subject)
            client.delete_subject(subject, permanent=True)


@pytest.fixture(scope="session")
def topic_prefix_factory(bootstrap: str, registry_url: str) -> Iterator[Callable[[], str]]:
    """Unique topic prefixes (``demoit<hex>.``); their topics and subjects go at the end of the session."""
    made: list[str] = []

    def make() -> str:
        prefix = f"demoit{uuid.uuid4().hex[:10]}."
        made.append(prefix)
        return prefix

    yield make
    for prefix in made:
        remove_demo_topics_and_subjects(bootstrap, registry_url, prefix)
