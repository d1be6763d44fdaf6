"""What Delta checkpoints cost a stream's appends, and what fewer of them cost readers: the
checkpoint interval of the tables the jobs create (``lakehouse.delta.CHECKPOINT_INTERVAL``)
against Delta's default of 10 commits, one run, one Spark session.

    .venv/bin/python bench/checkpoint_interval_bench.py [--appends 100] [--rows 500] [--tables 2]

A micro-batch appends to each table it touches (bronze: a table per topic; silver: one per
message type, the quarantine and the quality results), and every ``delta.checkpointInterval``
commits a table's commit also writes a checkpoint: Delta rebuilds the table's whole state from
its log and writes it as Parquet, in Spark jobs of its own. Here ``--tables`` tables of each
interval take ``--appends`` fresh appends of ``--rows`` rows each (what a running stream pays:
``append_idempotent`` with no replay), the two intervals in turn. Printed:

- writers: the mean seconds and Spark jobs per append, checkpoints included (a stream pays
  them), and the ratio of the project's interval to Delta's default (< 1.0: cheaper);
- readers: a cold read of a table (Delta's log cache cleared, so the snapshot is rebuilt from
  the log: the last checkpoint and the commits after it) at the version just before a
  checkpoint, where the longer interval leaves the most commit files to read: Spark's
  ``count()`` and delta-rs's load (what DuckDB and the catalog's path readers use), medians of
  ``--reads`` reads, and the same ratio.

The session is the jobs' own (``pipelines.spark.build_session``, ``local[2]``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from functools import partial
from typing import Any

from delta_append_bench import timed_append  # this folder: a fresh batch's append, timed

DELTA_DEFAULT = 10


def create(spark: Any, path: str, df: Any, interval: int) -> None:
    """An empty table of ``df``'s schema with ``interval`` as its checkpoint interval."""
    from delta.tables import DeltaTable

    (
        DeltaTable.create(spark)
        .location(path)
        .addColumns(df.schema)
        .property("delta.checkpointInterval", str(interval))
        .execute()
    )


def spark_read(spark: Any, path: str, version: int) -> tuple[float, int]:
    """Seconds of a cold read (rows counted) of ``path`` at ``version``, and its rows."""
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # noqa: SLF001
    start = time.perf_counter()
    rows = spark.read.format("delta").option("versionAsOf", version).load(path).count()
    return time.perf_counter() - start, rows


def rust_read(path: str, version: int) -> tuple[float, int]:
    """Seconds of delta-rs loading ``path`` at ``version`` and counting its rows."""
    from deltalake import DeltaTable

    start = time.perf_counter()
    rows = DeltaTable(path, version=version).to_pyarrow_dataset().count_rows()
    return time.perf_counter() - start, rows


def main() -> None:
    from lakehouse.delta import CHECKPOINT_INTERVAL

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=CHECKPOINT_INTERVAL, help="per table")
    parser.add_argument("--rows", type=int, default=500, help="rows an append writes")
    parser.add_argument("--tables", type=int, default=2, help="tables of each interval")
    parser.add_argument("--reads", type=int, default=5, help="cold reads of each kind")
    parser.add_argument(
        "--interval", type=int, default=CHECKPOINT_INTERVAL, help="the interval against 10"
    )
    args = parser.parse_args()
    if args.appends < 2 or args.tables < 1 or args.reads < 1 or args.interval < 1:
        parser.error("--appends >= 2, --tables >= 1, --reads >= 1, --interval >= 1")
    if args.interval == DELTA_DEFAULT:
        parser.error(f"--interval: another than Delta's default ({DELTA_DEFAULT}), to compare")

    from pyspark.sql import functions as F  # noqa: N812

    from pipelines.spark import build_session

    spark = build_session("checkpoint-interval-bench")
    root = tempfile.mkdtemp(prefix="checkpoint-interval-bench-")
    df = spark.range(args.rows).select(
        "id",
        F.col("id").cast("string").alias("value"),
        F.struct(F.col("id").alias("a"), (F.col("id") / 2).alias("b")).alias("nested"),
    )
    df = df.persist()
    df.count()
    intervals = (DELTA_DEFAULT, args.interval)
    paths = {n: [f"{root}/every-{n}-{t}" for t in range(args.tables)] for n in intervals}
    for n in intervals:
        for path in paths[n]:
            create(spark, path, df, n)
    appends: dict[int, list[tuple[float, int]]] = {n: [] for n in intervals}
    for i in range(1, args.appends + 1):
        for n in intervals if i % 2 else intervals[::-1]:
            for path in paths[n]:
                appends[n].append(timed_append(spark, df, path, i, "fresh"))

    # the version before the longer interval's first checkpoint after version 0, or the last
    last = min(args.appends, args.interval - 1)
    readers = {"Spark": partial(spark_read, spark), "delta-rs": rust_read}
    reads: dict[tuple[str, int], list[float]] = {}
    for r in range(args.reads):
        for n in intervals if r % 2 else intervals[::-1]:
            for kind, read in readers.items():
                seconds, rows = read(paths[n][0], last)
                assert rows == last * args.rows, (kind, n, rows)
                reads.setdefault((kind, n), []).append(seconds)

    print(
        f"{args.tables} table(s) of each interval, {args.appends} fresh appends of {args.rows} "
        "rows each (checkpoints included)"
    )
    mean = {n: statistics.mean(s for s, _ in appends[n]) for n in intervals}
    for n in intervals:
        jobs = statistics.mean(j for _, j in appends[n])
        print(f"  every {n:>3} commits: {mean[n]:.3f} s and {jobs:.2f} Spark jobs per append")
    ratio = mean[args.interval] / mean[DELTA_DEFAULT]
    print(f"  appends, {args.interval} / {DELTA_DEFAULT}: {ratio:.2f}x")
    print(f"cold reads at version {last} (medians of {args.reads})")
    for kind in readers:
        med = {n: statistics.median(reads[(kind, n)]) for n in intervals}
        figures = ", ".join(f"every {n}: {med[n]:.3f} s" for n in intervals)
        ratio = med[args.interval] / med[DELTA_DEFAULT]
        print(f"  {kind:<8} {figures}; {args.interval} / {DELTA_DEFAULT}: {ratio:.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
