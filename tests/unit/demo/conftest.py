"""Fixtures of the demo's unit tests: compiled demo schemas and a demo stream serialized
against confluent-kafka's in-memory mock registry (no broker, no network)."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.demo.generate import DemoStream
from pipelines.demo.schemas import SchemaVersion, load_schema_versions
from pipelines.demo.stream import DemoRecord


@pytest.fixture(scope="session")
def schema_versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SchemaVersion]:
    return load_schema_versions(tmp_path_factory.mktemp("demo-schemas"))


def make_stream(
    versions: dict[str, SchemaVersion], **kwargs: Any
) -> tuple[list[DemoRecord], DemoStream]:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    # A fresh mock per stream: ids are then assigned in the same order for equal seeds.
    client = SchemaRegistryClient.new_client({"url": "mock://demo-unit"})
    stream = DemoStream(client, versions=versions, **kwargs)
    return list(stream), stream


@pytest.fixture(scope="session")
def stream_factory(schema_versions: dict[str, SchemaVersion]) -> Any:
    """``stream_factory(**DemoStream kwargs) -> (records, stream)`` with the compiled schemas."""
    return lambda **kwargs: make_stream(schema_versions, **kwargs)


@pytest.fixture(scope="session")
def demo_stream(schema_versions: dict[str, SchemaVersion]) -> tuple[list[DemoRecord], DemoStream]:
    return make_stream(
        schema_versions, topic_prefix="unit.", records=1200, seed=11, poison_every=25
    )
