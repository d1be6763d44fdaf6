"""The silver job's throughput with quality checks on, against the same job with them off.

    .venv/bin/python bench/silver_quality_bench.py [--records 1000000] [--repeat 3]

Input: a bronze Delta table of ``--records`` Confluent-framed ``bench.v1.Order`` records (the
message of bench/silver_bench.py: 1,000 distinct messages serialized by confluent-kafka's
ProtobufSerializer against the registry test server, repeated), written once.

Each run is one whole ``SilverBatch`` over that table, as the silver job runs a micro-batch:
schema keys, registry lookup, decode, Delta append of the silver table, the quarantine, and
with quality on the table's default suite (lineage columns, Kafka timestamp bound) plus the
three configured rules below (two ``quarantine`` rules that some rows fail, one ``warn``),
the quality results written to their Delta table. Each run writes to a lakehouse of its own,
quality off and on alternate, and the medians are compared: ``on / off`` is the share of the
throughput that checking keeps (1.0 = checks cost nothing).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # silver_bench's message and input

from silver_bench import DISTINCT, compile_proto, make_messages  # noqa: E402

ORDER = "bench.v1.Order"
TOPIC = "bench.orders"
RULES = [
    {
        "message_type": ORDER,
        "expectation": "expect_column_values_to_not_match_regex",
        "kwargs": {"column": "order_id", "regex": "99$"},  # 1 in 100 fails
        "policy": "quarantine",
    },
    {
        "message_type": ORDER,
        "expectation": "expect_column_values_to_be_in_set",
        "kwargs": {"column": "currency", "value_set": ["EUR", "USD"]},
        "policy": "quarantine",
    },
    {
        "message_type": ORDER,
        "expectation": "expect_column_values_to_be_between",
        "kwargs": {"column": "item_count", "min_value": 1, "max_value": 3},  # some warn
        "policy": "warn",
    },
]


def frames(registry_url: str) -> list[bytes]:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    order_cls, msgs = make_messages(compile_proto())
    client = SchemaRegistryClient({"url": registry_url})
    ser = ProtobufSerializer(order_cls, client, {"use.deprecated.format": False})
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    return [ser(m, ctx) for m in msgs]


def write_bronze(spark: Any, path: str, values: list[bytes], records: int) -> None:
    """``records`` bronze rows cycling through ``values``, in bronze's columns."""
    from pyspark.sql import functions as F  # noqa: N812

    small = spark.createDataFrame(list(enumerate(values)), "fid long, value binary")
    (
        spark.range(records, numPartitions=4)
        .join(F.broadcast(small), F.col("id") % DISTINCT == F.col("fid"))
        .select(
            F.lit(None).cast("binary").alias("key"),
            "value",
            F.lit(TOPIC).alias("topic"),
            F.lit(0).alias("partition"),
            F.col("id").alias("offset"),
            F.current_timestamp().alias("timestamp"),
            F.lit(0).alias("timestampType"),
            F.array().cast("array<struct<key:string,value:binary>>").alias("headers"),
            F.current_timestamp().alias("_ingested_at"),
            F.current_date().alias("_ingest_date"),
        )
        .write.format("delta")
        .save(path)
    )


def run_batch(spark: Any, bronze: str, lake: str, registry_url: str, quality: bool) -> float:
    """Seconds for one SilverBatch over the bronze table into a fresh lakehouse ``lake``."""
    from codec import SchemaResolver, open_registry
    from pipelines.silver import SilverBatch
    from quality.checker import QualityChecker
    from quality.rules import parse_rules

    checker = QualityChecker(spark, lake, parse_rules(RULES)) if quality else None
    batch = SilverBatch(
        spark,
        lake,
        "bench-silver-quality",
        SchemaResolver(open_registry(registry_url)),
        checker=checker,
    )
    t0 = time.perf_counter()
    batch(spark.read.format("delta").load(bronze), 0)
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from registry_server import start_registry_server

    from lakehouse.layout import Layout
    from pipelines.spark import build_session

    registry = start_registry_server(port=0)
    spark = build_session(
        "silver-quality-bench",
        conf={"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "2g"},
    )
    work = Path(tempfile.mkdtemp(prefix="silver-quality-bench-"))
    bronze = str(work / "bronze-input")
    write_bronze(spark, bronze, frames(registry.url), args.records)
    run_batch(spark, bronze, str(work / "warm-up"), registry.url, quality=True)  # JIT, caches

    seconds: dict[bool, list[float]] = {False: [], True: []}
    for rep in range(args.repeat):
        for quality in (False, True):
            lake = str(work / f"run-{rep}-{'on' if quality else 'off'}")
            seconds[quality].append(run_batch(spark, bronze, lake, registry.url, quality))
    last = Layout(str(work / f"run-{args.repeat - 1}-on"))
    quarantined = spark.read.format("delta").load(last.quarantine).count()
    results = spark.read.format("delta").load(last.quality_results).count()

    off, on = statistics.median(seconds[False]), statistics.median(seconds[True])
    print(f"records: {args.records:,} ({DISTINCT} distinct bench.v1.Order), local[2]")
    print(f"quality off: {args.records / off:>12,.0f} records/s  (median of {args.repeat})")
    print(f"quality on:  {args.records / on:>12,.0f} records/s  (default suite + 3 rules)")
    print(f"on / off: {off / on:.2f}x the throughput (target >= 0.70x)")
    print(f"last run with quality: {quarantined:,} rows quarantined, {results} result rows")
    spark.stop()
    registry.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
