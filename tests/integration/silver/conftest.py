"""Fixtures of the silver integration tests: the real Kafka broker of infra/stack.sh, a
registry test server this module owns (so a test can take it down), one local[2] Spark
session (helpers: silver_itkit.py).

Kafka is PROTOLAKE_KAFKA_BOOTSTRAP (default 127.0.0.1:9092). When it does not answer, the
tests fail (CI starts it; run ``infra/stack.sh up``): they never skip.
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

from silver_itkit import BOOTSTRAP, Registry  # noqa: E402


@pytest.fixture(scope="session")
def bootstrap() -> str:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    try:
        admin.list_topics(timeout=15)
    except KafkaException as exc:
        pytest.fail(f"Kafka at {BOOTSTRAP} does not answer ({exc}); run `infra/stack.sh up`")
    return BOOTSTRAP


@pytest.fixture(scope="session")
def registry(tmp_path_factory: Any) -> Iterator[Registry]:
    reg = Registry(tmp_path_factory.mktemp("registry") / "registry.json")
    yield reg
    reg.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pipelines.spark import build_session

    session = build_session(
        "silver-integration-tests",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()
