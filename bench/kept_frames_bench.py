"""Small silver micro-batches of several message types: the decoded records and the quarantine
rows kept as a leaf (``lakehouse.materialized``, the batch's way) against persisted (Spark's
cache), one run, one Spark session.

    .venv/bin/python bench/kept_frames_bench.py [--batches 6] [--records 500] [--repeat 3]

Input: a bronze Delta table of ``--batches x --records`` records of the demo stream (six
message types in several schema versions, keys framed, a poison record every 50), as
bench/silver_versions_bench.py writes it.

Each run is ``--batches`` micro-batches of ``--records`` records, as a stream delivers them:
``SilverBatch`` over each slice, with the demo's quality rules, into a lakehouse of its own.
The two ways alternate, after a warm-up run of each:

- persisted: the frames the batch reads several times are ``persist``-ed; every query on them
  is planned over their whole plan and matched against Spark's cache;
- kept as a leaf: they are computed at once and read back from the kept rows
  (``DataFrame.localCheckpoint``).

Printed, the medians per run: wall time, the JVM's CPU time (the driver's process: in
``local[2]`` the executors too) and the Spark jobs run, and the median seconds per batch of
the batch and of its decode, check and write steps; leaf / persisted as ratios (< 1.0:
cheaper). Both ways must land the same rows in the silver tables and the quarantine (every
column but the processing times), or the bench fails.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the registry test server

from _alternate import alternate, medians  # noqa: E402
from pyspark import StorageLevel  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402, N812
from silver_versions_bench import ROOT, _landed, write_bronze  # noqa: E402
from small_batch_bench import jvm_cpu_seconds, last_job  # noqa: E402

STEPS = ("decode", "check", "write")


def persisted(df: Any) -> Any:
    """The baseline's way: Spark's cache (``lakehouse.materialized.release`` unpersists it),
    computed at once as ``lakehouse.materialized.materialize`` does on a cluster."""
    kept = df.persist(StorageLevel.MEMORY_AND_DISK)
    kept.count()
    return kept


def use(leaf: bool) -> None:
    """Make the silver batch keep its frames as a leaf (``leaf``) or persist them."""
    from lakehouse.materialized import materialize
    from pipelines.silver import batch, writes

    batch.materialize = writes.materialize = materialize if leaf else persisted


def run(spark: Any, bronze: str, lake: str, registry_url: str, args: Any, leaf: bool) -> Any:
    """(wall s, JVM CPU s, Spark jobs, batch s, decode s, check s, write s, landed rows)."""
    from codec import SchemaResolver, open_registry
    from lakehouse.delta import Replays
    from lakehouse.layout import Layout
    from lakehouse.tables import list_delta_tables
    from pipelines.settings import load_config
    from pipelines.silver import SilverBatch
    from quality.checker import QualityChecker
    from quality.rules import parse_rules

    use(leaf)
    rules = parse_rules(load_config(ROOT / "pipelines/demo/demo.toml").quality.expectations)
    batch = SilverBatch(
        spark,
        lake,
        "bench-kept-frames",
        SchemaResolver(open_registry(registry_url)),
        checker=QualityChecker(spark, lake, rules),
        replays=Replays(fresh_from=0),  # a running stream's batches
        driver_records=0,  # the Spark path keeps these frames; the driver path has none
    )
    source = spark.newSession().read.format("delta").load(bronze)
    before = jvm_cpu_seconds(spark), last_job(spark)
    t0 = time.perf_counter()
    for i in range(args.batches):
        low = i * args.records
        batch(source.where(F.col("offset").between(low, low + args.records - 1)), i)
    wall = time.perf_counter() - t0
    cpu, jobs = jvm_cpu_seconds(spark) - before[0], last_job(spark) - before[1]
    per_batch = [statistics.median(s.seconds for s in batch.history)]
    per_batch += [statistics.median(s.steps.get(k, 0.0) for s in batch.history) for k in STEPS]
    layout = Layout(lake)
    landed = _landed(spark, [*list_delta_tables(layout.silver, spark), layout.quarantine])
    return wall, cpu, jobs, *per_batch, landed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--records", type=int, default=500, help="records per batch")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from registry_server import start_registry_server

    from pipelines.spark import build_session

    registry = start_registry_server(port=0)
    spark = build_session("kept-frames-bench")
    work = Path(tempfile.mkdtemp(prefix="kept-frames-bench-"))
    bronze = str(work / "bronze-input")
    write_bronze(spark, bronze, registry.url, args.batches * args.records)

    def run_way(lake: str, leaf: bool) -> Any:
        return run(spark, bronze, lake, registry.url, args, leaf)

    figures = alternate(run_way, work, args.repeat)
    landed = {tuple(r[7]) for runs in figures.values() for r in runs}
    median = medians(figures, 7)
    print(
        f"{args.batches} batches of {args.records} demo records a run (six message types), "
        f"local[{spark.sparkContext.defaultParallelism}], medians of {args.repeat} runs"
    )
    print(f"rows landed a run: {len(next(iter(landed)))}, the same both ways: {len(landed) == 1}")
    for leaf, name in ((False, "persisted"), (True, "kept as a leaf")):
        wall, cpu, jobs, one, *steps = median[leaf]
        named = ", ".join(f"{k} {v:.2f} s" for k, v in zip(STEPS, steps, strict=True))
        print(
            f"{name:15s} {wall:6.1f} s wall  {cpu:6.1f} s JVM CPU  {jobs:4.0f} jobs  "
            f"per batch: {one:.2f} s ({named})"
        )
    (w0, c0, j0, b0, *_), (w1, c1, j1, b1, *_) = median[False], median[True]
    print(
        f"leaf / persisted: {w1 / w0:.2f}x the wall time, {c1 / c0:.2f}x the JVM CPU, "
        f"{j1 / j0:.2f}x the jobs, {b1 / b0:.2f}x the batch median"
    )
    spark.stop()
    registry.stop()
    return 0 if len(landed) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
