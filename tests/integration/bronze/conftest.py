"""Fixtures of the bronze integration tests: the real Kafka broker of infra/stack.sh and one
local[2] Spark session (helpers: bronze_itkit.py).

The broker is PROTOLAKE_KAFKA_BOOTSTRAP (default 127.0.0.1:9092). When it does not answer,
the tests fail (CI starts it; run ``infra/stack.sh up``): they never skip.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bronze_itkit import BOOTSTRAP, Kafka  # noqa: E402


@pytest.fixture(scope="session")
def bootstrap() -> str:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    try:
        admin.list_topics(timeout=15)
    except KafkaException as exc:
        pytest.fail(f"Kafka at {BOOTSTRAP} does not answer ({exc}); run `infra/stack.sh up`")
    return BOOTSTRAP


@pytest.fixture
def kafka(bootstrap: str) -> Kafka:
    return Kafka(bootstrap)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pipelines.spark import build_session

    session = build_session("bronze-integration-tests", conf={"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()
