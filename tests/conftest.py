"""Fixtures of the whole suite: one Spark session per test process, the local stack's Kafka
and a fresh in-process registry test server.

Layout: ``tests/unit`` is pure (no JVM, no socket: its conftest enforces it), ``tests/spark``
needs Spark with Delta but no service, ``tests/integration`` needs the local stack
(``infra/stack.sh``) or starts servers. Shared helpers live in ``tests/support``.

The Spark session is shared by every test of the process and never stopped by a test: a test
that changes a runtime setting (``spark.conf.set``) restores it, and tables and databases use
names of their own test folder. The jobs register their tables in the session's catalog under
the default ``[catalog]`` databases; after each test those databases are dropped (external
tables: no data is deleted), so the next test's lakehouse can use the same names.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.stack import BOOTSTRAP, REGISTRY, check_kafka, check_registry

# What every folder's session had: few partitions for small test data, on a 2-core machine.
SPARK_TEST_CONF = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """local[2] with Delta, UI off, driver on loopback (``pipelines.spark.build_session``)."""
    # No PYSPARK_PYTHON here: build_session gives the workers this interpreter by itself, and
    # tests/spark/pipelines/test_spark_session.py checks that it does.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pipelines.spark import build_session

    session = build_session("protolake-tests", conf=SPARK_TEST_CONF)
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _forget_catalog_tables() -> Iterator[None]:
    """Drop the default catalog databases of the shared session after each test."""
    yield
    from lakehouse.catalog import CatalogDatabases

    if "pyspark" not in sys.modules:
        return
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        return
    defaults = CatalogDatabases()
    for name in {defaults.bronze, defaults.silver, defaults.quarantine, defaults.quality}:
        if session.catalog.databaseExists(name):
            session.sql(f"DROP DATABASE IF EXISTS `{name}` CASCADE")


@pytest.fixture(scope="session")
def bootstrap() -> str:
    """The local stack's Kafka bootstrap address (fails when the broker does not answer)."""
    return check_kafka(BOOTSTRAP)


@pytest.fixture(scope="session")
def registry_url() -> str:
    """The local stack's schema registry URL (fails when it does not answer)."""
    return check_registry(REGISTRY)


@pytest.fixture
def registry() -> Iterator[Any]:
    """A fresh in-memory registry test server (``infra/registry_server.py``) on a free port."""
    from registry_server import start_registry_server

    handle = start_registry_server(port=0)
    yield handle
    handle.stop()
