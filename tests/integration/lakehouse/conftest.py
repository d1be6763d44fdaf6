"""Fixtures of the lakehouse integration tests: one local[2] Spark session with Delta."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pipelines.spark import build_session

    session = build_session(
        "lakehouse-integration-tests", conf={"spark.sql.shuffle.partitions": "2"}
    )
    yield session
    session.stop()
