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

from tests.support import jvm_archive
from tests.support.stack import BOOTSTRAP, REGISTRY, check_kafka, check_registry

# Every Spark application of the suite (this process's session, jobs run as subprocesses or
# through spark-submit, DAG tasks) reads tests/spark-conf/spark-defaults.conf: JVM options for
# short runs on small data (the file says why). When infra/run_tests.sh has built the suite's
# class archive (tests/support/jvm_archive.py), they read its copy in the machine's cache,
# which adds the archive and the class path it needs. Standalone masters and workers take the
# same from SPARK_DAEMON_JAVA_OPTS and SPARK_DAEMON_CLASSPATH. A caller's own settings win.
TEST_SPARK_CONF_DIR = jvm_archive.current_conf_dir() or jvm_archive.SUITE_CONF_DIR


def suite_jvm_options() -> str:
    """The driver JVM options of the suite's spark-defaults.conf."""
    return jvm_archive.driver_jvm_options(TEST_SPARK_CONF_DIR)


def _use_suite_spark_settings() -> None:
    os.environ.setdefault("SPARK_CONF_DIR", str(TEST_SPARK_CONF_DIR))
    for key, value in jvm_archive.daemon_settings(TEST_SPARK_CONF_DIR).items():
        os.environ.setdefault(key, value)


_use_suite_spark_settings()

# The session of a test process: few partitions for small test data, on a 2-core machine.
# Delta rebuilds a table's state with one task instead of the local sessions' two: each such
# task generates the source code of Delta's action deserializer anew (Spark generates it for
# typed operations even when expressions are interpreted). With two tasks that took about 8 %
# of a session's JVM CPU over tests/spark; with one, tests/spark used about 7 % less CPU (A/B
# runs). These JVMs (the test processes' sessions) use about half of the suite's CPU. The
# results are the same.
SPARK_TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "1",
}


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


def _active_session() -> Any:
    """The process's Spark session, or None (no test of the process built one: pyspark is
    not even imported by a unit-test process)."""
    if "pyspark" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


@pytest.fixture(autouse=True)
def _forget_catalog_tables() -> Iterator[None]:
    """Drop the default catalog databases of the shared session after each test."""
    yield
    from lakehouse.catalog import CatalogDatabases

    session = _active_session()
    if session is None:
        return
    defaults = CatalogDatabases()
    for name in {defaults.bronze, defaults.silver, defaults.quarantine, defaults.quality}:
        if session.catalog.databaseExists(name):
            session.sql(f"DROP DATABASE IF EXISTS `{name}` CASCADE")


# What a job's own session settings (pipelines.spark.LOCAL_CONF) would change in the shared
# session: a job run in this process (protolake status, maintain) builds its session with
# getOrCreate, which applies them to the running one. Given back after each test.
_RUNTIME_TEST_CONF = ("spark.sql.shuffle.partitions", "spark.databricks.delta.snapshotPartitions")


@pytest.fixture(autouse=True)
def _restore_session_conf() -> Iterator[None]:
    """Set the shared session's test settings again where a test's job changed them."""
    yield
    session = _active_session()
    if session is None:
        return
    for key in _RUNTIME_TEST_CONF:
        if session.conf.get(key, None) != SPARK_TEST_CONF[key]:
            session.conf.set(key, SPARK_TEST_CONF[key])


# The loggers a command configures (pipelines.cli sets their levels and the progress logger's
# handler): a test that runs a command in this process must not change what the next test logs.
_CONFIGURED_LOGGERS = (
    "pipelines",
    "codec",
    "lakehouse",
    "quality",
    "pipelines.progress",
    "pipelines.kafka_client",
)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Give back each configured logger's level, handlers and propagation after each test
    (the root logger's handlers are pytest's: they are left to it)."""
    import logging

    loggers = [logging.getLogger(name) for name in _CONFIGURED_LOGGERS]
    saved = [(lg.level, list(lg.handlers), lg.propagate) for lg in loggers]
    yield
    for lg, (level, handlers, propagate) in zip(loggers, saved, strict=True):
        lg.setLevel(level)
        lg.handlers[:] = handlers
        lg.propagate = propagate


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


# `make test` runs the suite on three processes (pytest-xdist, `--dist loadfile
# --no-loadscope-reorder`), which hand out whole files in collection order. The files that take
# minutes go first, longest first, and the many short files fill in around them; otherwise a
# long file handed out last runs alone while the other processes idle. Then the rest of
# tests/integration, tests/spark, and tests/unit last. Figures: seconds of one serial run.
LONG_FILES_FIRST = (
    "tests/integration/catalog/test_catalog_services.py",  # ~430 s: jobs, a second application
    "tests/integration/s3/test_s3_cluster.py",  # ~260 s: a master, two workers, a kill
    "tests/integration/silver/test_silver_stream.py",  # ~200 s: SIGKILL, registry outage
    "tests/integration/s3/test_s3_lakehouse.py",  # ~190 s: the demo on the object store
    "tests/integration/dags/test_ingest_dag.py",  # ~175 s: two DAG runs of two Spark submits
    "tests/integration/ops/test_ops_commands.py",  # ~160 s
    "tests/integration/silver/test_silver_follows_bronze.py",  # ~140 s: three jobs in turn
    "tests/integration/catalog/test_metastore_postgres.py",  # ~140 s: PostgreSQL, a restart
    "tests/integration/demo/test_demo_end_to_end.py",  # ~120 s
    "tests/integration/s3/test_s3_stream_maintenance.py",  # ~100 s: two streams on the store
    "tests/integration/quality/test_quality_compiled_parity.py",  # ~95 s
    "tests/integration/dags/test_streaming_dag.py",  # ~85 s
    "tests/unit/dags/test_stream_supervision.py",  # ~50 s: real processes supervised
    "tests/unit/dags/test_run_state.py",  # ~65 s: an Airflow database, seven DAG runs
    "tests/integration/s3/test_s3_store_outage.py",  # ~90 s: a private store stopped
    "tests/integration/s3/test_s3_two_writers.py",  # ~50 s
    "tests/integration/bronze/test_bronze_kill_restart.py",  # ~40 s
    "tests/integration/silver_batch/test_batch.py",  # ~40 s
)
_LAYERS = ("tests/integration/", "tests/spark/", "tests/unit/")


def _run_order(item: pytest.Item) -> tuple[int, int]:
    path = item.nodeid.split("::", 1)[0]
    if path in LONG_FILES_FIRST:
        return (0, LONG_FILES_FIRST.index(path))
    for rank, layer in enumerate(_LAYERS, start=1):
        if path.startswith(layer):
            return (rank, 0)
    return (len(_LAYERS) + 1, 0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the collected tests for the parallel run: see :data:`LONG_FILES_FIRST`. The sort
    is stable, so tests keep their order within a file."""
    items.sort(key=_run_order)
