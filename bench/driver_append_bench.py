"""A micro-batch's append committed by delta-rs in the driver against Spark's append of the same
rows: ``lakehouse.driver_append.append_arrow`` and ``lakehouse.delta.append_idempotent``, one
run, one Spark session.

    .venv/bin/python bench/driver_append_bench.py [--appends 12] [--rows 500] [--tables 4]

Each round appends ``--rows`` rows of bronze's schema (computed once and cached, as a batch's
rows are when it appends them) to ``--tables`` tables at the same time
(``lakehouse.streaming.run_together``, as bronze's topics and silver's message types are
appended), once each way in turn: Spark's append of every table, then each table's rows
collected as Arrow and committed by delta-rs. Both are fresh batches of a running stream
(``Replays(fresh_from=0)``: no lookup), with the same commit marker. It prints the median
seconds of a round each way, the Spark jobs of a round, and the ratio (driver / Spark; the
baseline is Spark's append, measured in the same run). The first round of each way is left
out (the JVM's first queries).
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def bronze_rows(spark: Any, n: int) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    return (
        spark.range(n, numPartitions=2)
        .select(
            F.col("id").cast("string").cast("binary").alias("key"),
            F.concat(F.lit(b"\x00\x00\x00\x00\x01"), F.lit(b"x" * 120)).alias("value"),
            F.lit("bench.topic").alias("topic"),
            (F.col("id") % 4).cast("int").alias("partition"),
            F.col("id").alias("offset"),
            F.lit(now).cast("timestamp").alias("timestamp"),
            F.lit(0).alias("timestampType"),
            F.array(F.struct(F.lit("trace").alias("key"), F.lit(b"1").alias("value"))).alias(
                "headers"
            ),
            F.lit(now).cast("timestamp").alias("_ingested_at"),
            F.lit(now.date()).alias("_ingest_date"),
        )
        .cache()
    )


def round_of(spark: Any, df: Any, paths: list[str], batch_id: int, way: str) -> tuple[float, int]:
    """Seconds and Spark jobs of one round: every table appended ``way`` at the same time."""
    from lakehouse.delta import Replays, append_idempotent
    from lakehouse.driver_append import append_arrow
    from lakehouse.streaming import run_together

    fresh = Replays(fresh_from=0)

    def spark_append(path: str) -> None:
        append_idempotent(df, path, "bench", batch_id, replays=fresh)

    def driver_append(path: str) -> None:
        if not append_arrow(spark, df.toArrow(), path, "bench", batch_id, replays=fresh):
            raise RuntimeError(f"{path}: delta-rs did not take the append")

    group = f"{way}-{batch_id}-{time.monotonic_ns()}"
    spark.sparkContext.setJobGroup(group, group)
    append = spark_append if way == "spark" else driver_append
    start = time.perf_counter()
    run_together([partial(append, path) for path in paths])
    seconds = time.perf_counter() - start
    return seconds, len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--appends", type=int, default=12, help="rounds each way")
    p.add_argument("--rows", type=int, default=500, help="rows per table and round")
    p.add_argument("--tables", type=int, default=4, help="tables appended at the same time")
    args = p.parse_args()
    from pipelines.spark import build_session

    spark = build_session("driver-append-bench")
    spark.sparkContext.setLogLevel("ERROR")
    df = bronze_rows(spark, args.rows)
    df.count()
    with tempfile.TemporaryDirectory(prefix="driver-append-") as tmp:
        paths = {way: [f"{tmp}/{way}{i}" for i in range(args.tables)] for way in ("spark", "rs")}
        for path in paths["spark"] + paths["rs"]:
            df.limit(0).write.format("delta").partitionBy("_ingest_date").save(path)
        runs: dict[str, list[tuple[float, int]]] = {"spark": [], "rs": []}
        for batch_id in range(args.appends):
            for way in ("spark", "rs"):
                runs[way].append(round_of(spark, df, paths[way], batch_id, way))
        counts = {
            way: spark.read.format("delta").load(paths[way][0]).count() for way in ("spark", "rs")
        }
    spark.stop()
    if counts["spark"] != counts["rs"] or counts["rs"] != args.rows * args.appends:
        print(f"the tables differ: {counts}", file=sys.stderr)
        return 1
    medians = {way: statistics.median(s for s, _ in runs[way][1:]) for way in runs}
    jobs = {way: statistics.mode(j for _, j in runs[way][1:]) for way in runs}
    print(
        f"{args.tables} tables x {args.rows} rows a round, {args.appends - 1} rounds each way "
        "(the first left out)"
    )
    print(f"  Spark's append (baseline)   {medians['spark']:.3f} s a round, {jobs['spark']} jobs")
    print(f"  collected + delta-rs        {medians['rs']:.3f} s a round, {jobs['rs']} jobs")
    print(f"  ratio driver / Spark        {medians['rs'] / medians['spark']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
