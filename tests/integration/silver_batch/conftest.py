"""Fixtures of the silver batch tests (one ``SilverBatch`` on bronze rows written by the test,
no Kafka): real Confluent frames from confluent-kafka's serializers over real schema versions,
registered with a registry test server (helpers: tests/support/silver_testkit.py).

``registry`` is the suite's registry test server kept for the whole session here: the module
fixtures build their frames once, with the schema ids this one server assigned.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from registry_server import start_registry_server

from tests.support.silver_testkit import Producer, load_version


@pytest.fixture(scope="session")
def registry() -> Iterator[Any]:
    handle = start_registry_server(port=0)
    yield handle
    handle.stop()


@pytest.fixture(scope="session")
def versions() -> dict[str, Any]:
    return {v: load_version(v) for v in ("v1", "v2", "conflict")}


@pytest.fixture(scope="session")
def producer(registry: Any) -> Producer:
    return Producer(registry.url)
