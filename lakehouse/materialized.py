"""A micro-batch's intermediate frames, computed once and read back without recomputing.

A silver batch reads its decoded records several times (the quality checks, each table's
append, the quarantine). :func:`materialize` computes such a frame now, in one Spark job, and
keeps its rows in the executors' block stores. How it keeps them depends on where the
executors run:

- On a local master (driver and executors in one JVM) the rows are kept as a local
  checkpoint (``DataFrame.localCheckpoint``): the frame returned reads the kept blocks and its
  plan is one leaf. A persisted frame instead keeps its whole plan (the bronze scan, the
  framing expressions, the decoding pass and its wide nested schema), and every query built
  on it is analysed over that plan and matched against Spark's cache, fragment by fragment,
  before the cached rows replace it; on a small batch that driver work is a large part of the
  batch (``bench/kept_frames_bench.py`` compares the two ways on 500-record batches of the
  demo's six message types). A local master has no executor to lose, so nothing is given up.
- On a cluster the frame is persisted: a local checkpoint's rows are not recomputed when an
  executor that holds some is lost (the job reading them fails), a persisted frame's are, from
  its plan.

:func:`release` frees the rows when the batch is done, either way.
"""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame


def keeps_as_leaf(master: str) -> bool:
    """Whether :func:`materialize` keeps frames as local checkpoints under the Spark ``master``:
    only ``local`` and ``local[...]`` (``local-cluster[...]`` has executors of its own)."""
    return master == "local" or master.startswith("local[")


def materialize(
    df: DataFrame,
    level: StorageLevel = StorageLevel.MEMORY_AND_DISK,
    *,
    as_leaf: bool | None = None,
) -> DataFrame:
    """``df`` computed now (one Spark job) and kept at ``level``; the frame returned reads the
    kept rows, as a leaf when ``as_leaf`` (default: :func:`keeps_as_leaf` of the session's
    master), else through Spark's cache (see the module docstring). Free them with
    :func:`release`. A classic session only (a Spark Connect one has no ``sparkContext``)."""
    if as_leaf is None:
        as_leaf = keeps_as_leaf(str(df.sparkSession.sparkContext.master))
    if as_leaf:
        return df.localCheckpoint(eager=True, storageLevel=level)
    kept = df.persist(level)
    kept.count()
    return kept


def release(df: DataFrame) -> None:
    """Free the rows kept for ``df`` by :func:`materialize` (or by ``persist``). A frame kept as
    a leaf cannot be read afterwards; a persisted one is only uncached. Any other frame: no-op."""
    if df.is_cached:
        df.unpersist()
        return
    plan = df._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)
