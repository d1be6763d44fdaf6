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
  starts (``ExpressionEvaluation(adaptive_fixed=True)``: left as it is);
- small-batch settings: what ``pipelines.silver.evaluation`` chooses for a batch below 50,000
  records: adaptive execution off, the shuffles in at most as many partitions as there are
  cores.

Printed: the medians of wall time and of the JVM's CPU time (the driver's process: in
``local[2]`` the executors too) per run, and small / launch as ratios (< 1.0: cheaper).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bench message and its input

from silver_quality_bench import RULES, frames, write_bronze  # noqa: E402


def jvm_cpu_seconds(spark: Any) -> float:
    """User + system CPU seconds of the session's JVM so far (Linux ``/proc``)."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(spark: Any, bronze: str, lake: str, registry_url: str, args: Any, small: bool) -> Any:
    """(wall seconds, JVM CPU seconds, silver rows) of ``args.batches`` batches into ``lake``."""
    from pyspark.sql import functions as F  # noqa: N812

    from codec import SchemaResolver, open_registry
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
    )
    batch.evaluation = ExpressionEvaluation(spark, fixed=False, adaptive_fixed=not small)
    query_session = spark.newSession()
    source = query_session.read.format("delta").load(bronze)
    cpu0, t0 = jvm_cpu_seconds(spark), time.perf_counter()
    for i in range(args.batches):
        low = i * args.records
        batch(source.where(F.col("offset").between(low, low + args.records - 1)), i)
    wall, cpu = time.perf_counter() - t0, jvm_cpu_seconds(spark) - cpu0
    return wall, cpu, sum(sum(h.silver.values()) for h in batch.history)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--records", type=int, default=100, help="records per batch")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from registry_server import start_registry_server

    from pipelines.spark import build_session

    registry = start_registry_server(port=0)
    spark = build_session("small-batch-bench", conf={"spark.sql.shuffle.partitions": "4"})
    work = Path(tempfile.mkdtemp(prefix="small-batch-bench-"))
    bronze = str(work / "bronze-input")
    write_bronze(spark, bronze, frames(registry.url), args.batches * args.records)
    for small in (False, True):  # warm-up of both
        run(spark, bronze, str(work / f"warm-up-{small}"), registry.url, args, small)

    figures: dict[bool, list[Any]] = {False: [], True: []}
    for rep in range(args.repeat):
        for small in (False, True):
            lake = str(work / f"run-{rep}-{'small' if small else 'launch'}")
            figures[small].append(run(spark, bronze, lake, registry.url, args, small))
    rows = {r[2] for runs in figures.values() for r in runs}
    wall = {k: statistics.median(r[0] for r in runs) for k, runs in figures.items()}
    cpu = {k: statistics.median(r[1] for r in runs) for k, runs in figures.items()}
    print(
        f"{args.batches} batches of {args.records} bench.v1.Order records a run, "
        f"local[{spark.sparkContext.defaultParallelism}], medians of {args.repeat} runs"
    )
    print(f"silver rows a run: {sorted(rows)} (the same both ways)")
    print(f"launch settings (adaptive on): {wall[False]:6.1f} s wall  {cpu[False]:6.1f} s JVM CPU")
    print(f"small-batch settings:          {wall[True]:6.1f} s wall  {cpu[True]:6.1f} s JVM CPU")
    print(
        f"small / launch: {wall[True] / wall[False]:.2f}x the wall time, "
        f"{cpu[True] / cpu[False]:.2f}x the JVM CPU"
    )
    spark.stop()
    registry.stop()
    return 0 if len(rows) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
