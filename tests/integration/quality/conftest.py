"""Fixtures for quality tests: one session-scoped local[2] Spark session with Delta."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from pipelines.spark import build_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("protolake-quality-tests")
    yield session
    session.stop()
