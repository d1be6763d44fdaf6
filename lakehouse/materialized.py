"""A micro-batch's intermediate frames, computed once and read back as a plain leaf.

A silver batch reads its decoded records several times (the quality checks, each table's
append, the quarantine). :func:`materialize` computes such a frame now, in one Spark job, and
keeps its rows in the executors' block stores (``DataFrame.localCheckpoint``); the frame it
returns reads those blocks, and its plan is one leaf.

Why not ``persist``: a persisted frame keeps its whole plan (here the bronze scan, the framing
expressions, the decoding pass and its wide nested schema), and every query built on it is
analysed over that plan and matched against Spark's cache, fragment by fragment, before the
cached rows replace it. On a small batch that driver work is a large part of the batch
(``bench/kept_frames_bench.py`` compares the two ways on 500-record batches of the demo's six
message types).

The price: the kept rows are not recomputed when an executor that holds some is lost; a job
that reads them then fails, which fails the micro-batch, and the query's restart runs the
batch again from its checkpoint (every write of a batch is idempotent). :func:`release` frees
the rows when the batch is done.
"""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame


def materialize(df: DataFrame, level: StorageLevel = StorageLevel.MEMORY_AND_DISK) -> DataFrame:
    """``df`` computed now (one Spark job) and kept at ``level``; the frame returned reads the
    kept rows (see the module docstring). Free them with :func:`release`."""
    return df.localCheckpoint(eager=True, storageLevel=level)


def release(df: DataFrame) -> None:
    """Free the rows kept for ``df``: those :func:`materialize` kept, or ``df``'s cache when it
    was persisted. The frame cannot be read afterwards."""
    plan = df._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)
    else:
        df.unpersist()
