"""Silver-shaped test batches for the quality tests (imported by the test modules)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

ORDER = "shop.v1.Order"
TABLE = "shop_v1__order"
NOW = datetime.now(UTC).replace(microsecond=0)

SILVER_SCHEMA = StructType(
    [
        StructField("_key", BinaryType(), True),
        StructField("order_id", StringType(), True),
        StructField("status", StringType(), True),
        StructField("amount", DoubleType(), True),
        StructField("qty", IntegerType(), True),
        StructField("email", StringType(), True),
        StructField("_kafka_topic", StringType(), True),
        StructField("_kafka_partition", IntegerType(), True),
        StructField("_kafka_offset", LongType(), True),
        StructField("_kafka_timestamp", TimestampType(), True),
        StructField("_schema_id", IntegerType(), True),
        StructField("_schema_guid", StringType(), True),
        StructField("_message_type", StringType(), True),
        StructField("_processed_at", TimestampType(), True),
    ]
)


def order_row(offset: int, **overrides):
    """One silver row of shop.v1.Order; every field valid unless overridden."""
    row = {
        "_key": f"k{offset}".encode(),
        "order_id": f"o-{offset}",
        "status": "PAID",
        "amount": 10.0 + offset,
        "qty": 1 + offset % 5,
        "email": f"user{offset}@example.com",
        "_kafka_topic": "shop.orders",
        "_kafka_partition": offset % 2,
        "_kafka_offset": offset,
        "_kafka_timestamp": NOW - timedelta(minutes=offset),
        "_schema_id": 1,
        "_schema_guid": None,
        "_message_type": ORDER,
        "_processed_at": NOW,
    }
    unknown = set(overrides) - set(row)
    assert not unknown, unknown
    row.update(overrides)
    return row


def make_batch(spark: SparkSession, rows: list[dict]) -> DataFrame:
    names = SILVER_SCHEMA.fieldNames()
    return spark.createDataFrame([tuple(r[n] for n in names) for r in rows], schema=SILVER_SCHEMA)


def keys(df: DataFrame) -> set[tuple[str, int, int]]:
    return {
        (r["_kafka_topic"], r["_kafka_partition"], r["_kafka_offset"])
        for r in df.select("_kafka_topic", "_kafka_partition", "_kafka_offset").collect()
    }
