"""Small silver micro-batches on the driver path against the same batches on the Spark path.

    .venv/bin/python bench/driver_path_bench.py [--batches 10] [--records 500] [--repeat 3]

Input: a bronze Delta table of ``--batches x --records`` Confluent-framed ``bench.v1.Order``
records (the message of bench/silver_bench.py, serialized by confluent-kafka's
ProtobufSerializer against the registry test server), written once.

Each run is ``--batches`` micro-batches of ``--records`` records, as a stream delivers them:
each batch is ``SilverBatch`` over its slice of the bronze table, read through a session of its
own (a streaming query's), with the default quality suite plus the three rules of
bench/silver_quality_bench.py, into a lakehouse of its own, each batch planned by this run (as
a stream's are: no replay to look up). The two ways alternate, after a warm-up run of each:

- Spark path (``driver_records=0``): frame heads, decode pass through the Python workers,
  checks as one Spark aggregation per table, appends collected from the executors;
- driver path (the default for batches of at most ``pipelines.silver.driver_pass.
  DRIVER_RECORDS``): the rows collected once, framed, decoded and checked in the driver
  (``QualityChecker.validate_arrow``), appended by delta-rs.

Printed, the medians per run: wall time, the JVM's CPU time (the driver's process: in
``local[2]`` the executors too) and the Spark jobs run; driver / Spark as ratios (< 1.0:
cheaper). Both ways must land the same silver rows and quarantine rows (their offsets are
compared), or the bench fails.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bench message and its input

from _alternate import alternate, medians  # noqa: E402
from silver_quality_bench import RULES  # noqa: E402
from small_batch_bench import batches_args, bench_input, jvm_cpu_seconds, last_job  # noqa: E402


def run(spark: Any, bronze: str, lake: str, registry_url: str, args: Any, driver: bool) -> Any:
    """(wall s, JVM CPU s, Spark jobs, landed offsets) of ``args.batches`` batches."""
    from pyspark.sql import functions as F  # noqa: N812

    from codec import SchemaResolver, open_registry
    from lakehouse.delta import Replays
    from pipelines.silver import SilverBatch
    from pipelines.silver.driver_pass import DRIVER_RECORDS
    from quality.checker import QualityChecker
    from quality.rules import parse_rules

    batch = SilverBatch(
        spark,
        lake,
        "bench-driver-path",
        SchemaResolver(open_registry(registry_url)),
        checker=QualityChecker(spark, lake, parse_rules(RULES)),
        replays=Replays(fresh_from=0),
        driver_records=DRIVER_RECORDS if driver else 0,
    )
    source = spark.newSession().read.format("delta").load(bronze)
    before = jvm_cpu_seconds(spark), last_job(spark)
    t0 = time.perf_counter()
    for i in range(args.batches):
        low = i * args.records
        batch(source.where(F.col("offset").between(low, low + args.records - 1)), i)
    wall = time.perf_counter() - t0
    cpu, jobs = jvm_cpu_seconds(spark), last_job(spark)
    return wall, cpu - before[0], jobs - before[1], landed(spark, lake)


def landed(spark: Any, lake: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The Kafka offsets in silver and in quarantine."""
    from lakehouse.layout import Layout
    from lakehouse.tables import list_delta_tables

    layout = Layout(lake)
    silver = [spark.read.format("delta").load(t) for t in list_delta_tables(layout.silver, spark)]
    quarantine = spark.read.format("delta").load(layout.quarantine)
    return (
        tuple(sorted(r[0] for df in silver for r in df.select("_kafka_offset").collect())),
        tuple(sorted(r[0] for r in quarantine.select("_kafka_offset").collect())),
    )


def main() -> int:
    args = batches_args(__doc__, 500)
    registry, spark, work, bronze = bench_input("driver-path-bench", args.batches * args.records)
    figures = alternate(
        lambda lake, driver: run(spark, bronze, lake, registry.url, args, driver), work, args.repeat
    )
    outcomes = {r[3] for runs in figures.values() for r in runs}
    median = medians(figures, 3)
    silver, quarantine = next(iter(outcomes))
    print(
        f"{args.batches} batches of {args.records} bench.v1.Order records a run, "
        f"local[{spark.sparkContext.defaultParallelism}], medians of {args.repeat} runs"
    )
    print(
        f"silver rows a run: {len(silver)}, quarantine rows: {len(quarantine)}, "
        f"the same offsets both ways: {len(outcomes) == 1}"
    )
    for driver, name in ((False, "Spark path"), (True, "driver path")):
        wall, cpu, jobs = median[driver]
        print(f"{name:12s} {wall:6.1f} s wall  {cpu:6.1f} s JVM CPU  {jobs:4.0f} jobs")
    (w0, c0, j0), (w1, c1, j1) = median[False], median[True]
    print(
        f"driver / Spark: {w1 / w0:.2f}x the wall time, {c1 / c0:.2f}x the JVM CPU, "
        f"{j1 / j0:.2f}x the jobs; {w1 / args.batches:.2f} s a batch of {args.records} records"
    )
    spark.stop()
    registry.stop()
    return 0 if len(outcomes) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
