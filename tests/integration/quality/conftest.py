"""Fixtures for quality tests: one session-scoped local[2] Spark session with Delta."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.spark import build_session

# pytest runs with --import-mode=importlib: make quality_testkit importable by the test modules.
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("protolake-quality-tests")
    yield session
    session.stop()
