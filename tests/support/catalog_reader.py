"""A second Spark application that knows nothing of protolake but the documented settings.

    python tests/support/catalog_reader.py METASTORE_URI DATABASE... > report.json

It opens a plain session with Delta's jars and the four settings README "For analysts" lists
(Delta's extension and catalog, ``spark.sql.catalogImplementation=hive``,
``spark.hadoop.hive.metastore.uris``), and prints, for every table of the given databases,
its row count, its columns (with comments) and its comment and properties, as JSON. It
imports nothing of the project: what it finds, it found by name in the metastore.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession


def main(uri: str, databases: list[str]) -> None:
    jars = sorted(
        glob.glob(str(Path(__file__).resolve().parents[2] / "infra/.cache/jars/spark/*.jar"))
    )
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("catalog-reader")
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.hive.metastore.uris", uri)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, dict[str, object]] = {}
    for db in databases:
        for row in spark.sql(f"SHOW TABLES IN `{db}`").collect():
            name = f"{db}.{row['tableName']}"
            columns = {
                r["col_name"]: r["comment"]
                for r in spark.sql(f"DESCRIBE TABLE {name}").collect()
                if r["col_name"] and not r["col_name"].startswith("#")
            }
            detail = spark.sql(f"DESCRIBE DETAIL {name}").first()
            out[name] = {
                "rows": spark.sql(f"SELECT count(*) AS n FROM {name}").first()["n"],
                "columns": columns,
                "comment": detail["description"],
                "properties": dict(detail["properties"] or {}),
                "location": detail["location"],
            }
    json.dump(out, sys.stdout)
    spark.stop()


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    main(sys.argv[1], sys.argv[2:])
