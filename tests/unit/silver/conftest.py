"""Fixtures of the silver unit tests: one local[2] Spark session, a registry test server,
confluent-kafka serializers over real schema versions."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "infra"))
sys.path.insert(0, str(HERE))

from registry_server import start_registry_server  # noqa: E402
from silver_testkit import Producer, load_version  # noqa: E402


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


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need the venv's packages
    from pipelines.spark import build_session

    session = build_session(
        "silver-unit-tests",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()
