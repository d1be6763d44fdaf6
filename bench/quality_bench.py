"""Cost of data-quality checks per silver micro-batch: the same batch written with and without.

Baseline: a cached silver-shaped batch (lineage columns + a few typed ones) appended to a Delta
table. Checked: ``QualityChecker.validate`` (defaults + three configured rules, one of them a
failing ``quarantine`` rule), then ``outcome.passed`` appended to silver, ``outcome.failed``
appended to a quarantine table and the results written, as the silver job does. Both run in
the same process on the same session, alternating, and the medians are compared.

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python bench/quality_bench.py [--rows 200000] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812

from pipelines.spark import build_session
from quality.checker import QualityChecker
from quality.rules import parse_rules

ORDER = "shop.v1.Order"
TABLE = "shop_v1__order"
RULES = [
    {
        "message_type": ORDER,
        "expectation": "expect_column_values_to_not_be_null",
        "kwargs": {"column": "order_id"},
        "policy": "quarantine",
    },
    {
        "message_type": ORDER,
        "expectation": "expect_column_values_to_be_in_set",
        "kwargs": {"column": "status", "value_set": ["NEW", "PAID", "SHIPPED"]},
        "policy": "quarantine",
    },
    {
        "message_type": ORDER,
        "expectation": "expect_column_values_to_be_between",
        "kwargs": {"column": "qty", "min_value": 0, "max_value": 100},
        "policy": "warn",
    },
]


def make_batch(spark: SparkSession, rows: int) -> DataFrame:
    """Silver-shaped rows; 0.5% have a null order_id, 0.1% an unknown status."""
    statuses = F.array(F.lit("NEW"), F.lit("PAID"), F.lit("SHIPPED"))
    return spark.range(rows).select(
        F.col("id").cast("string").cast("binary").alias("_key"),
        F.when(F.col("id") % 200 == 0, None)
        .otherwise(F.concat(F.lit("o-"), F.col("id")))
        .alias("order_id"),
        F.when(F.col("id") % 1000 == 1, F.lit("LOST"))
        .otherwise(statuses[F.col("id") % 3])
        .alias("status"),
        (F.col("id") % 97 / 3.0).alias("amount"),
        (F.col("id") % 50).cast("int").alias("qty"),
        F.lit("orders").alias("_kafka_topic"),
        (F.col("id") % 4).cast("int").alias("_kafka_partition"),
        (F.col("id") / 4).cast("long").alias("_kafka_offset"),
        F.current_timestamp().alias("_kafka_timestamp"),
        F.lit(1).alias("_schema_id"),
        F.lit(None).cast("string").alias("_schema_guid"),
        F.lit(ORDER).alias("_message_type"),
        F.current_timestamp().alias("_processed_at"),
    )


def run_plain(batch: DataFrame, root: Path) -> float:
    start = time.perf_counter()
    batch.write.format("delta").mode("append").save(str(root / "plain" / "silver"))
    return time.perf_counter() - start


def run_checked(
    checker: QualityChecker, batch: DataFrame, root: Path, batch_id: int
) -> tuple[float, dict[str, float], int]:
    """Total seconds, seconds per step, rows quarantined."""
    steps: dict[str, float] = {}
    start = last = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        steps[name] = now - last
        last = now

    outcome = checker.validate(batch, message_type=ORDER, table=TABLE, batch_id=batch_id)
    lap("validate")
    assert not outcome.fail_batch
    outcome.passed.write.format("delta").mode("append").save(str(root / "checked" / "silver"))
    lap("silver write")
    outcome.failed.write.format("delta").mode("append").save(str(root / "checked" / "quarantine"))
    lap("quarantine write")
    checker.write_results(outcome.results, batch_id)
    lap("results write")
    return time.perf_counter() - start, steps, outcome.rows_quarantined


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()

    spark = build_session("protolake-quality-bench")
    spark.sparkContext.setLogLevel("ERROR")
    root = Path(tempfile.mkdtemp(prefix="quality-bench-"))
    batch = make_batch(spark, args.rows).cache()
    print(f"batch: {batch.count()} rows (cached), lakehouse {root}")
    start = time.perf_counter()
    checker = QualityChecker(spark, str(root / "lakehouse"), parse_rules(RULES))
    print(f"checker start-up (GE context, suite): {time.perf_counter() - start:.2f}s")

    # Warm-up: first Delta write, first GE run (JIT, class loading) are not per-batch costs.
    run_plain(batch, root)
    run_checked(checker, batch, root, batch_id=0)

    plain: list[float] = []
    checked: list[float] = []
    validation: list[float] = []
    quarantined = 0
    for rep in range(1, args.reps + 1):
        plain.append(run_plain(batch, root))
        total, steps, quarantined = run_checked(checker, batch, root, batch_id=rep)
        checked.append(total)
        validation.append(steps["validate"])
        detail = ", ".join(f"{name} {secs:.2f}s" for name, secs in steps.items())
        print(f"rep {rep}: without checks {plain[-1]:.2f}s, with checks {total:.2f}s ({detail})")

    base, full, val = (
        statistics.median(plain),
        statistics.median(checked),
        statistics.median(validation),
    )
    print(f"rows per batch: {args.rows}, quarantined per batch: {quarantined}")
    print(f"median without checks: {base:.2f}s  ({args.rows / base:,.0f} rows/s)")
    print(
        f"median with checks:    {full:.2f}s  ({args.rows / full:,.0f} rows/s), of which validate {val:.2f}s"
    )
    print(f"ratio with/without checks: {full / base:.2f}x; validation alone: {val / base:.2f}x")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    spark.stop()


if __name__ == "__main__":
    main()
