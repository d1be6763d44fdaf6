"""Fixtures of the object-store tests: the stack's S3 store (``infra/stack.sh up s3``), a
fresh bucket per module (deleted after it), and unique demo topics (removed at the end of the session)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.s3 import S3Store, load_store


@pytest.fixture(scope="session")
def s3_store() -> S3Store:
    return load_store()


@pytest.fixture(scope="module")
def bucket(s3_store: S3Store) -> Iterator[str]:
    """A new bucket for the module, deleted at its end (a bucket left behind keeps volumes of
    the stack's store, which has few: see :meth:`S3Store.delete_bucket`)."""
    name = s3_store.create_bucket()
    yield name
    s3_store.delete_bucket(name)


@pytest.fixture(scope="session")
def topic_prefix_factory(bootstrap: str, registry_url: str) -> Iterator[Callable[[], str]]:
    """Unique demo topic prefixes (``s3it<hex>.``); their topics and subjects go at the end."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    made: list[str] = []

    def make() -> str:
        prefix = f"s3it{uuid.uuid4().hex[:10]}."
        made.append(prefix)
        return prefix

    yield make
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(tuple(made))]
    if topics:
        for future in admin.delete_topics(topics, operation_timeout=30).values():
            future.result(timeout=60)
    client = SchemaRegistryClient({"url": registry_url})
    for subject in client.get_subjects():
        if subject.startswith(tuple(made)):
            client.delete_subject(subject)
            client.delete_subject(subject, permanent=True)
