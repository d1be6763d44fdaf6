"""Fixtures of the DAG integration tests: unique topic prefixes on the real local stack
(Kafka, the schema registry and Spark come from tests/conftest.py; the throw-away Airflow that
runs dags/ is tests/support/airflow_kit.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient


@pytest.fixture(scope="module")
def topic_prefix(bootstrap: str, registry_url: str) -> Iterator[str]:
    """A unique topic prefix; its topics and subjects are removed at the end."""
    prefix = f"dagit{uuid.uuid4().hex[:10]}."
    yield prefix
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
