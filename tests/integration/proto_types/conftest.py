"""Fixtures: one local[2] Spark session (Delta on the classpath) and the compiled test protos."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

UNIT_DIR = Path(__file__).resolve().parents[2] / "unit" / "proto_types"
sys.path.insert(0, str(UNIT_DIR))

from proto_types_testkit import Protos, compile_protos  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need the venv's packages
    from pipelines.spark import build_session

    session = build_session(
        "proto-types-tests",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def protos(tmp_path_factory: pytest.TempPathFactory) -> Protos:
    return Protos(compile_protos(tmp_path_factory.mktemp("protos"), "types3.proto"))
