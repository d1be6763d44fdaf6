"""Small silver micro-batches with the small-batch settings, against the same batches with
Spark's adaptive execution on as launched.

    .venv/bin/python bench/small_batch_bench.py [--batches 10] [--records 100] [--repeat 3]

Input: a bronze Delta table of ``--batches x --records`` Confluent-framed ``bench.v1.Order``
records (the message of bench/silver_bench.py, serialized by confluent-kafka's
ProtobufSerializer against the registry test server), written once.

Each run is ``--batches`` micro-batches of ``--records`` records, as a stream delivers them:
each batch is ``SilverBatch`` over its slice of the bronze table, read through a session of its
own (a streaming query's), with the default quality suite plus the three rules of
bench/silver_quality_bench.py, into a lakehouse of its own. The two ways alternate, after a
warm-up run of each (the JVM's JIT compiler is busy for minutes after a start):

- launch settings: adaptive execution on, as a session without ``spark.sql.adaptive.enabled``
  starts, and the launch's shuffle partitions (``pipelines.spark.LOCAL_CONF``: 4), which
  adaptive execution coalesces (``ExpressionEvaluation(adaptive_fixed=True)``: left as is);
- small-batch settings: what ``pipelines.silver.evaluation`` chooses for a batch below 50,000
  records: adaptive execution off, each shuffle in one partition here.

Printed, the medians per run: wall time, the JVM's CPU time (the driver's process: in
``local[2]`` the executors too), of which its JIT compilers' time, and the Spark jobs run;
small / launch as ratios (< 1.0: cheaper). Both ways must land the same silver rows (the
rows' offsets are compared), or the bench fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bench message and its input

from _alternate import alternate, medians  # noqa: E402
from silver_quality_bench import RULES, frames, write_bronze  # noqa: E402


def jvm_cpu_seconds(spark: Any) -> float:
    """User + system CPU seconds of the session's JVM so far (Linux ``/proc``)."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def jit_seconds(spark: Any) -> float:
    """Time the session's JVM spent compiling with its JIT compilers so far."""
    jvm = spark.sparkContext._jvm
    return (
        jvm.java.lang.management.ManagementFactory.getCompilationMXBean().getTotalCompilationTime()
        / 1000
    )


def last_job(spark: Any) -> int:
    """The id of the latest Spark job (ids count up from 0)."""
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1)


def run(spark: Any, bronze: str, lake: str, registry_url: str, args: Any, small: bool) -> Any:
    """(wall s, JVM CPU s, JIT s, Spark jobs, silver offsets) of ``args.batches`` batches."""
    from pyspark.sql import functions as F  # noqa: N812

    from codec import SchemaResolver, open_registry
    from lakehouse.layout import Layout
    from lakehouse.tables import list_delta_tables
    from pipelines.silver import SilverBatch
    from pipelines.silver.evaluation import ExpressionEvaluation
    from quality.checker import QualityChecker
    from quality.rules import parse_rules

    batch = SilverBatch(
        spark,
        lake,
        "bench-small-batch",
        SchemaResolver(open_registry(registry_url)),
        checker=QualityChecker(spark, lake, parse_rules(RULES)),
        driver_records=0,  # these settings are the Spark path's (the driver path runs no shuffle)
    )
    batch.evaluation = ExpressionEvaluation(spark, fixed=False, adaptive_fixed=not small)
    query_session = spark.newSession()
    source = query_session.read.format("delta").load(bronze)
    before = jvm_cpu_seconds(spark), jit_seconds(spark), last_job(spark)
    t0 = time.perf_counter()
    for i in range(args.batches):
        low = i * args.records
        batch(source.where(F.col("offset").between(low, low + args.records - 1)), i)
        if not small and query_session.conf.get("spark.sql.adaptive.enabled") != "true":
            raise SystemExit("adaptive execution is off as launched: nothing to compare")
    wall = time.perf_counter() - t0
    cpu, jit, jobs = jvm_cpu_seconds(spark), jit_seconds(spark), last_job(spark)
    tables = list_delta_tables(Layout(lake).silver, spark)
    read = [spark.read.format("delta").load(t).select("_kafka_offset") for t in tables]
    offsets = sorted(r[0] for df in read for r in df.collect())
    return wall, cpu - before[0], jit - before[1], jobs - before[2], offsets


def batches_args(doc: str, records: int) -> argparse.Namespace:
    """``--batches``, ``--records`` (per batch, default ``records``) and ``--repeat``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--records", type=int, default=records, help="records per batch")
    parser.add_argument("--repeat", type=int, default=3)
    return parser.parse_args()


def bench_input(name: str, records: int) -> tuple[Any, Any, Path, str]:
    """(registry test server, Spark session, work folder, bronze table of ``records``
    ``bench.v1.Order`` records) of the bench ``name``."""
    from registry_server import start_registry_server

    from pipelines.spark import build_session

    registry = start_registry_server(port=0)
    spark = build_session(name)
    work = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    bronze = str(work / "bronze-input")
    write_bronze(spark, bronze, frames(registry.url), records)
    return registry, spark, work, bronze


def main() -> int:
    args = batches_args(__doc__, 100)
    registry, spark, work, bronze = bench_input("small-batch-bench", args.batches * args.records)
    figures = alternate(
        lambda lake, small: run(spark, bronze, lake, registry.url, args, small), work, args.repeat
    )
    landed = {tuple(r[4]) for runs in figures.values() for r in runs}
    median = medians(figures, 4)
    print(
        f"{args.batches} batches of {args.records} bench.v1.Order records a run, "
        f"local[{spark.sparkContext.defaultParallelism}], medians of {args.repeat} runs"
    )
    print(
        f"silver rows a run: {len(next(iter(landed)))}, the same offsets both ways: {len(landed) == 1}"
    )
    for small, name in ((False, "launch settings (adaptive on)"), (True, "small-batch settings")):
        wall, cpu, jit, jobs = median[small]
        print(
            f"{name:30s} {wall:6.1f} s wall  {cpu:6.1f} s JVM CPU ({jit:5.1f} s JIT)  {jobs:4.0f} jobs"
        )
    (w0, c0, _, j0), (w1, c1, _, j1) = median[False], median[True]
    print(
        f"small / launch: {w1 / w0:.2f}x the wall time, {c1 / c0:.2f}x the JVM CPU, {j1 / j0:.2f}x the jobs"
    )
    spark.stop()
    registry.stop()
    return 0 if len(landed) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
