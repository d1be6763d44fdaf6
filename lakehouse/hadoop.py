"""The Hadoop file system of a lakehouse location, reached from Python through Spark's JVM.

Small files of the lakehouse (app ids, leases, checkpoint logs, the Data Docs) are read,
written and listed through the session's Hadoop file system, so that every URI scheme Hadoop
serves (``file:``, ``s3a://``, ...) works the same way and the session's Hadoop settings (the
``[s3]`` keys among them) apply. :func:`hadoop_path` is the one place that opens it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class HadoopPath(NamedTuple):
    """A location as Hadoop sees it: the JVM view, its ``fs.Path`` and its ``FileSystem``."""

    jvm: Any
    path: Any
    fs: Any


def hadoop_path(spark: SparkSession, location: str) -> HadoopPath:
    """``location`` (any Hadoop URI or local path) with the file system that serves it."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(location)
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    return HadoopPath(jvm, path, path.getFileSystem(hadoop_conf))
