"""A Delta table read as a stream: :func:`read_delta_stream`.

A new query (no offsets in its checkpoint yet) starts from a snapshot of the table: Delta
reconstructs the table's state (Spark jobs over its log) and sorts its files before the first
batch can be planned: the first trigger's ``latestOffset`` took 2.5 s on a bronze table of 37
commits (one query alone, 2 cores), and 10 s for each of four queries that start together
beside bronze. Reading a young table's commits from version 0 gives the same rows, and that
``latestOffset`` took 0.3 s alone, 0.6 s for each of the four. So a young table
(:func:`reads_from_first_version`) is read from version 0.

Young means: no checkpoint of the log yet (nothing of the log was cleaned up, and at most a
checkpoint interval of commits to read, ``lakehouse.delta.CHECKPOINT_INTERVAL``), and a first
commit written less than :data:`YOUNG_TABLE_SECONDS` ago. The age bound keeps out a quiet
table whose early files a VACUUM may have deleted after an OPTIMIZE rewrote them: its commits
still name them, a snapshot does not. (A VACUUM with a retention under an hour, forced past
``protolake maintain``'s refusal, can still remove files a young table's commits name, as it
can break any reader Delta warns of.)

The offsets then say ``isStartingVersion: false``; a query that has offsets resumes from them
either way (Spark ignores the starting version once the checkpoint has one).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from lakehouse.hadoop import hadoop_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

#: a table whose first commit is older than this is read from a snapshot
YOUNG_TABLE_SECONDS = 3600
_FIRST_COMMIT = "00000000000000000000.json"


def reads_from_first_version(spark: SparkSession, path: str) -> bool:
    """Whether a new stream reads the Delta table at ``path`` from its version 0 (see the
    module docstring): its log has no checkpoint and its first commit is younger than
    :data:`YOUNG_TABLE_SECONDS`. Two file-system calls, on any Hadoop URI."""
    jvm, delta_log, fs = hadoop_path(spark, f"{path.rstrip('/')}/_delta_log")
    if fs.exists(jvm.org.apache.hadoop.fs.Path(delta_log, "_last_checkpoint")):
        return False
    first = jvm.org.apache.hadoop.fs.Path(delta_log, _FIRST_COMMIT)
    if not fs.exists(first):
        return False
    age_ms = time.time() * 1000 - fs.getFileStatus(first).getModificationTime()
    return age_ms < YOUNG_TABLE_SECONDS * 1000


def read_delta_stream(spark: SparkSession, path: str) -> DataFrame:
    """The Delta table at ``path`` as a streaming DataFrame; a young one read from version 0
    (:func:`reads_from_first_version`)."""
    reader = spark.readStream.format("delta")
    if reads_from_first_version(spark, path):
        log.debug("%s: a young table, read from its version 0", path)
        reader = reader.option("startingVersion", "0")
    return reader.load(path)
