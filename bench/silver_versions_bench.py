"""Silver micro-batches of several message types: every schema version decoded in one pass
(the batch's way) against one pass per version, one run, one Spark session.

    .venv/bin/python bench/silver_versions_bench.py [--batches 6] [--records 600] [--repeat 3]

Input: a bronze Delta table of ``--batches x --records`` records of the demo stream
(``pipelines.demo.generate.DemoStream``: four topics, six message types in several schema
versions, keys framed too, a poison record every 50), serialized against the registry test
server, in one table as bronze's ``single`` table mode writes them.

Each run is ``--batches`` micro-batches of ``--records`` records, as a stream delivers them:
``SilverBatch`` over each slice, with the demo's quality rules, into a lakehouse of its own.
The two ways alternate, after a warm-up run of each (the JVM's JIT compiler is busy for
minutes after a start):

- one pass: the records of every schema version of the batch go through the Python workers
  together, into one cached frame (``decode_pass.decode_versions``);
- per version: each version is read from the batch, decoded and cached on its own
  (``decode.decode_version`` per version).

Printed, the medians per run: wall time, the JVM's CPU time (the driver's process: in
``local[2]`` the executors too; not the Python workers', which the wall time includes) and the
Spark jobs run, and the median seconds per batch of the decode and check steps (the check is
the first step that reads the decoded cache, so it pays for the decoding); one pass / per
version as ratios (< 1.0: cheaper). Both ways must land the same rows in the silver tables and
the quarantine (every column but the processing times), or the bench fails.
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
from pyspark.sql import functions as F  # noqa: E402, N812
from small_batch_bench import jvm_cpu_seconds, last_job  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def write_bronze(spark: Any, path: str, registry_url: str, records: int) -> None:
    """``records`` demo records as one bronze table (offsets 0.. in production order)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from pipelines.demo.generate import DemoStream

    client = SchemaRegistryClient.new_client({"url": registry_url})
    stream = DemoStream(client, topic_prefix="bench.", records=records)
    rows = [
        (r.key, r.value, r.topic, 0, i, 0, [(k, v) for k, v in r.headers])
        for i, r in enumerate(stream)
    ]
    schema = (
        "key binary, value binary, topic string, partition int, offset long, "
        "timestampType int, headers array<struct<key:string,value:binary>>"
    )
    from pyspark.sql import functions as F  # noqa: N812

    df = spark.createDataFrame(rows, schema).select(
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        F.current_timestamp().alias("timestamp"),
        "timestampType",
        "headers",
        F.current_timestamp().alias("_ingested_at"),
        F.current_date().alias("_ingest_date"),
    )
    df.write.format("delta").save(path)


def batch_class(one_pass: bool) -> Any:
    """``SilverBatch``, or a subclass that decodes each schema version on its own."""
    from dataclasses import replace

    from pipelines.silver import SilverBatch

    if one_pass:
        return SilverBatch

    class PerVersion(SilverBatch):
        def _decode_versions(self, path, plans, key_types):  # noqa: ANN001, ANN202
            out = {}
            for plan in plans:  # each version as a batch of it alone decodes it
                for res in plan.versions:
                    one = replace(plan, versions=[res])
                    out.update(super()._decode_versions(path, [one], key_types))
            return out

    return PerVersion


def run(spark: Any, bronze: str, lake: str, registry_url: str, args: Any, one_pass: bool) -> Any:
    """(wall s, JVM CPU s, Spark jobs, decode s, check s, landed rows) of one run."""
    from pyspark.sql import functions as F  # noqa: N812

    from codec import SchemaResolver, open_registry
    from lakehouse.delta import Replays
    from lakehouse.layout import Layout
    from lakehouse.tables import list_delta_tables
    from pipelines.settings import load_config
    from quality.checker import QualityChecker
    from quality.rules import parse_rules

    rules = parse_rules(load_config(ROOT / "pipelines/demo/demo.toml").quality.expectations)
    batch = batch_class(one_pass)(
        spark,
        lake,
        "bench-versions",
        SchemaResolver(open_registry(registry_url)),
        checker=QualityChecker(spark, lake, rules),
        replays=Replays(fresh_from=0),  # a running stream's batches
        driver_records=0,  # the Spark path's decode pass is what this bench compares
    )
    source = spark.newSession().read.format("delta").load(bronze)
    before = jvm_cpu_seconds(spark), last_job(spark)
    t0 = time.perf_counter()
    for i in range(args.batches):
        low = i * args.records
        batch(source.where(F.col("offset").between(low, low + args.records - 1)), i)
    wall = time.perf_counter() - t0
    cpu, jobs = jvm_cpu_seconds(spark) - before[0], last_job(spark) - before[1]
    steps = [s.steps for s in batch.history]
    decode = statistics.median(s.get("decode", 0.0) for s in steps)
    check = statistics.median(s.get("check", 0.0) for s in steps)
    layout = Layout(lake)
    tables = [*list_delta_tables(layout.silver, spark), layout.quarantine]
    landed = _landed(spark, tables)
    return wall, cpu, jobs, decode, check, landed


def _landed(spark: Any, tables: list[str]) -> list[tuple[str, int, str]]:
    """(table, offset, row) of every row landed in the silver tables and the quarantine, the
    row as JSON without the columns that hold the time it was processed."""
    out = []
    for path in tables:
        df = spark.read.format("delta").load(path)
        df = df.drop(*[c for c in ("_processed_at", "_quarantined_at") if c in df.columns])
        rows = df.select("_kafka_offset", F.to_json(F.struct(*df.columns))).collect()
        out += [(path.rsplit("/", 1)[-1], r[0], r[1]) for r in rows]
    return sorted(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--records", type=int, default=600, help="records per batch")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from registry_server import start_registry_server

    from pipelines.spark import build_session

    registry = start_registry_server(port=0)
    spark = build_session("silver-versions-bench")
    work = Path(tempfile.mkdtemp(prefix="silver-versions-bench-"))
    bronze = str(work / "bronze-input")
    write_bronze(spark, bronze, registry.url, args.batches * args.records)

    def run_way(lake: str, one_pass: bool) -> Any:
        return run(spark, bronze, lake, registry.url, args, one_pass)

    figures = alternate(run_way, work, args.repeat)
    landed = {tuple(r[5]) for runs in figures.values() for r in runs}
    median = medians(figures, 5)
    print(
        f"{args.batches} batches of {args.records} demo records a run (six message types), "
        f"local[{spark.sparkContext.defaultParallelism}], medians of {args.repeat} runs"
    )
    print(f"rows landed a run: {len(next(iter(landed)))}, the same both ways: {len(landed) == 1}")
    for one_pass, name in ((False, "per version"), (True, "one pass")):
        wall, cpu, jobs, decode, check = median[one_pass]
        print(
            f"{name:12s} {wall:6.1f} s wall  {cpu:6.1f} s JVM CPU  {jobs:4.0f} jobs  "
            f"per batch: decode {decode:.2f} s, check {check:.2f} s"
        )
    (w0, c0, j0, _, _), (w1, c1, j1, _, _) = median[False], median[True]
    print(
        f"one pass / per version: {w1 / w0:.2f}x the wall time, {c1 / c0:.2f}x the JVM CPU, "
        f"{j1 / j0:.2f}x the jobs"
    )
    spark.stop()
    registry.stop()
    return 0 if len(landed) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
