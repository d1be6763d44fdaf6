"""Finding and reading the Delta tables of the lakehouse: whether a path holds one, the tables
under a folder, a table's version, comment and properties.

:func:`is_delta_table`, :func:`list_delta_tables`, :func:`table_version` and
:func:`silver_versions` answer with Spark when a session is given (any Hadoop file system:
``s3a://``, ``abfss://``, local), and with ``deltalake`` (delta-rs) when none is, so callers
without a JVM (Airflow) read the same tables (on an object store, through a
:class:`lakehouse.store.Store`: ``pipelines.settings.object_store.lakehouse_store``). Callers name a
table; none reads its log.

pyspark and delta-spark are imported by the functions that use them, never at import time:
a caller without Spark imports this module too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.hadoop import hadoop_path
from lakehouse.layout import Layout
from lakehouse.store import Store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# -- finding tables ------------------------------------------------------------------------


def table_properties(spark: SparkSession, path: str) -> dict[str, str]:
    """The table properties of the Delta table at ``path`` (empty when there is none)."""
    metadata = table_metadata(spark, path)
    return metadata.properties if metadata is not None else {}


@dataclass(frozen=True)
class TableMetadata:
    """What a Delta table's log says of it besides its data: comment and properties."""

    description: str
    properties: dict[str, str]


def table_metadata(spark: SparkSession, path: str) -> TableMetadata | None:
    """The comment and properties of the Delta table at ``path`` (None when there is none).

    Read from the Delta log by path: never through the session's catalog, so this answers
    while a shared metastore is down (``DESCRIBE DETAIL delta.`path``` asks the metastore
    first, for a database named ``delta``). From the snapshot's metadata (the log's checksum
    or last commits), not ``DeltaTable.detail()``: that also counts the table's files, a
    reconstruction of its whole state (three Spark jobs) each time.
    """
    from delta.tables import DeltaTable

    if not is_delta_table(path, spark):
        return None
    # forPath brings the table's log up to date: its latest snapshot is the one just read
    snapshot = DeltaTable.forPath(spark, path)._jdt.deltaLog().unsafeVolatileSnapshot()
    # The metadata action as the log writes it, as one string. Iterating the JVM's map from
    # Python instead would end with a Java exception that PySpark classifies through fourteen
    # class look-ups, each a search of every jar (tens of milliseconds per table).
    metadata = json.loads(snapshot.metadata().json())["metaData"]
    return TableMetadata(
        metadata.get("description") or "", dict(metadata.get("configuration") or {})
    )


def is_delta_table(
    path: str,
    spark: SparkSession | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> bool:
    """Whether ``path`` holds a Delta table with at least one commit.

    With a session, Delta through Spark answers (any Hadoop file system); without, delta-rs
    (with ``storage_options`` for an object store).
    """
    if spark is not None:
        from delta.tables import DeltaTable

        if DeltaTable.isDeltaTable(spark, path):
            return True
        # Delta keeps one log object per path for the session; asked while another process
        # was writing the first commit (the log folder there, no commit yet), it would answer
        # "no table" until the session ends. Dropped, the next question reads the log again.
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        jvm.org.apache.spark.sql.delta.DeltaLog.invalidateCache(
            spark._jsparkSession, jvm.org.apache.hadoop.fs.Path(path)
        )
        return False
    from deltalake import DeltaTable as RsDeltaTable

    return bool(RsDeltaTable.is_deltatable(path, storage_options=dict(storage_options or {})))


def list_delta_tables(
    folder: str, spark: SparkSession | None = None, store: Store | None = None
) -> list[str]:
    """Paths of the Delta tables directly under ``folder``, sorted.

    With a session, the folder is listed through Hadoop's file system (any URI; paths come
    back as Hadoop writes them, e.g. ``file:/...``); without one, through ``store`` (default:
    this machine's, :meth:`lakehouse.store.Store.local`), and paths are ``<folder>/<name>``.

    Raises:
        ValueError: no session, and ``folder`` is not on the store's file system.
    """
    if spark is None:
        store = store or Store.local()
        if not store.serves(folder):
            raise ValueError(f"listing {folder} needs a Spark session or a store that serves it")
        options = store.storage_options
        return [p for p in store.subfolders(folder) if is_delta_table(p, storage_options=options)]
    _, hpath, fs = hadoop_path(spark, folder)
    if not fs.exists(hpath):
        return []
    children = [s.getPath().toString() for s in fs.listStatus(hpath) if s.isDirectory()]
    return sorted(p for p in children if is_delta_table(p, spark))


def table_version(
    path: str,
    spark: SparkSession | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> int:
    """The latest committed version of the Delta table at ``path`` (delta-rs reads it with
    ``storage_options`` when no session is given).

    Raises:
        Exception: ``path`` is no Delta table (Delta's or delta-rs' own error).
    """
    if spark is not None:
        from delta.tables import DeltaTable

        return int(DeltaTable.forPath(spark, path).history(1).collect()[0]["version"])
    from deltalake import DeltaTable as RsDeltaTable

    return int(RsDeltaTable(path, storage_options=dict(storage_options or {})).version())


def silver_versions(
    layout: Layout, spark: SparkSession | None = None, store: Store | None = None
) -> dict[str, int]:
    """``{path: latest version}`` of every silver table (with Spark, or through ``store``, as
    above)."""
    options = store.storage_options if store is not None and spark is None else None
    return {
        p: table_version(p, spark, storage_options=options)
        for p in list_delta_tables(layout.silver, spark, store)
    }
