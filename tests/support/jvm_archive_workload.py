"""What the JVM runs while ``tests.support.jvm_archive`` records the classes it loads: a short
pass over what the suite's Spark applications do (Delta appends with an app id, a MERGE, a
read of the log, a stream from Delta with ``foreachBatch``, Python workers through Arrow, a
Kafka source's plan). A class it does not load is loaded from its jar as usual.

``python -m tests.support.jvm_archive_workload <scratch folder>``
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame

from pipelines.spark import build_session


def _double(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    import pyarrow.compute as pc

    for batch in batches:
        yield batch.set_column(0, "id", pc.multiply(batch.column(0), 2))


def main(scratch: Path) -> None:
    spark = build_session(
        "jvm-archive", master="local[2]", conf={"spark.sql.shuffle.partitions": "2"}
    )
    table = str(scratch / "table")
    rows = spark.range(50).selectExpr(
        "id", "named_struct('a', id, 'b', cast(id as string)) AS s", "current_timestamp() AS t"
    )
    for version in range(3):
        rows.write.format("delta").mode("append").option("txnAppId", "archive").option(
            "txnVersion", version
        ).save(table)
    spark.sql(
        f"MERGE INTO delta.`{table}` AS t USING (SELECT 1L AS id) AS u ON t.id = u.id "
        "WHEN MATCHED THEN UPDATE SET t.s.b = 'x'"
    )
    spark.read.format("delta").load(table).groupBy("s.b").count().collect()
    spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    rows.mapInArrow(_double, rows.schema).count()

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        batch.write.format("delta").mode("append").save(str(scratch / "copy"))

    query = (
        spark.readStream.format("delta")
        .load(table)
        .writeStream.foreachBatch(each_batch)
        .option("checkpointLocation", str(scratch / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    kafka = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:1")
        .option("subscribe", "archive")
        .load()
    )
    kafka.selectExpr("CAST(value AS STRING)").explain()
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
