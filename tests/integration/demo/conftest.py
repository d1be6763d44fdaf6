"""Fixtures of the demo's integration tests: unique topic prefixes on the real local stack
(Kafka and the schema registry come from tests/conftest.py), and clean-up of what a test
created."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient


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
