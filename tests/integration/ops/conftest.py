"""Fixtures of the ops integration tests: the real broker (infra/stack.sh), an in-process
registry test server, one local[2] Spark session, and ONE lakehouse really written by bronze
and silver from a small demo stream plus two extra topics (helpers: ops_itkit.py):

- ``<prefix>late``: records framed with a schema id the registry does not have yet (silver
  quarantines them as UNKNOWN_SCHEMA; a test registers the schema and replays them);
- ``<prefix>tx``: a transactional topic with a committed, an aborted and a committed
  transaction (offset gaps that are markers and aborted records, not losses).

Kafka not answering fails the tests (run ``infra/stack.sh up``): they never skip.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ops_itkit import BOOTSTRAP, Lakehouse, build_lakehouse, check_kafka  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pipelines.spark import build_session

    session = build_session(
        "ops-integration-tests",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def lake(spark: Any, tmp_path_factory: Any) -> Iterator[Lakehouse]:
    check_kafka(BOOTSTRAP)
    lh = build_lakehouse(spark, tmp_path_factory.mktemp("ops"))
    yield lh
    lh.close()
