"""Quality results: one record per expectation per validated batch, kept in Delta.

Table ``<lakehouse>/quality/results`` (schema :data:`RESULTS_SCHEMA`). ``expectation`` is the
rule's id ``name(key=value, ...)`` (unique within a suite), ``expectation_type`` the bare GE
name. ``rows_checked`` and ``rows_quarantined`` describe the whole batch of the table and are
repeated on each of its records, so a summary needs no second table.

Writes are idempotent: :func:`write_results` replaces the records of ``(batch_id, table)``
atomically (one Delta commit with ``replaceWhere``), so a retried micro-batch leaves exactly one
record per ``(batch_id, table, expectation)``. A new streaming checkpoint restarts batch ids at
0 and then replaces the older run's records of the same batch id: the table holds the latest
verdict per batch id, not a history of retries.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import (
    BooleanType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

RESULTS_SCHEMA = StructType(
    [
        StructField("batch_id", LongType(), False),
        StructField("table", StringType(), False),
        StructField("message_type", StringType(), False),
        StructField("expectation", StringType(), False),
        StructField("expectation_type", StringType(), False),
        StructField("policy", StringType(), False),
        StructField("success", BooleanType(), False),
        StructField("element_count", LongType(), True),
        StructField("unexpected_count", LongType(), True),
        StructField("observed_value", StringType(), True),
        StructField("validated_at", TimestampType(), False),
        StructField("rows_checked", LongType(), True),
        StructField("rows_quarantined", LongType(), True),
        # The writer's stream (silver passes its checkpoint's app id): batch ids restart at 0
        # in every stream, so (batch_id, table) alone would let one stream replace another's.
        StructField("source", StringType(), True),
    ]
)


@dataclass(frozen=True)
class QualityResult:
    """The verdict of one expectation on one batch of one table."""

    batch_id: int
    table: str
    message_type: str
    expectation: str
    expectation_type: str
    policy: str
    success: bool
    element_count: int | None
    unexpected_count: int | None
    observed_value: str | None
    validated_at: datetime
    rows_checked: int | None
    rows_quarantined: int | None

    def as_row(self, source: str = "") -> tuple[Any, ...]:
        values = {**asdict(self), "source": source}
        return tuple(values[f.name] for f in RESULTS_SCHEMA.fields)


def results_path(lakehouse_path: str) -> str:
    return f"{lakehouse_path.rstrip('/')}/quality/results"


def write_results(
    spark: SparkSession,
    lakehouse_path: str,
    results: list[QualityResult],
    batch_id: int,
    source: str = "",
) -> int:
    """Replace the records of ``(source, batch_id)`` for the tables in ``results``.

    Returns the number of records written. ``source`` names the writing stream (silver: its
    checkpoint's app id), so streams whose batch ids coincide never replace each other's rows.

    Raises:
        ValueError: a result belongs to another batch id.
    """
    if not results:
        return 0
    others = sorted({r.batch_id for r in results} - {batch_id})
    if others:
        raise ValueError(f"write_results(batch_id={batch_id}) got results of batch ids {others}")
    tables = sorted({r.table for r in results})
    frame = spark.createDataFrame([r.as_row(source) for r in results], schema=RESULTS_SCHEMA)
    path = results_path(lakehouse_path)
    _add_source_column(spark, path)
    condition = (
        f"batch_id = {int(batch_id)} AND `table` IN ({', '.join(_sql_str(t) for t in tables)})"
        f" AND coalesce(source, '') = {_sql_str(source)}"
    )
    (
        frame.coalesce(1)
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", condition)
        .save(path)
    )
    return len(results)


def _add_source_column(spark: SparkSession, path: str) -> None:
    """Results tables written before the ``source`` column existed get it (null) in place."""
    if not _is_delta_table(path):
        return
    columns = spark.read.format("delta").load(path).columns
    if "source" not in columns:
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (source STRING)")


def summarize(spark: SparkSession, lakehouse_path: str) -> list[dict[str, Any]]:
    """Per table: batches, rows checked / passed / quarantined, and failures by expectation.

    Returns a list (sorted by table) of dicts::

        {"table", "message_type", "batches", "checked", "passed", "quarantined",
         "failed_batches",   # batches a `fail` expectation rejected
         "failed_by_expectation": {expectation: {"policy", "failed_batches", "unexpected_rows"}}}

    ``passed`` counts rows that stayed in silver from batches that were not rejected. A batch
    is one stream's micro-batch (``source``, ``batch_id``); batches with no row of the table
    are not counted. Empty list when nothing has been validated yet.
    """
    path = results_path(lakehouse_path)
    if not _is_delta_table(path):
        return []
    rows = spark.read.format("delta").load(path).select(*RESULTS_SCHEMA.fieldNames()).collect()
    per_batch: dict[tuple[str, str, int], dict[str, Any]] = {}
    by_table: dict[str, dict[str, Any]] = {}
    for row in rows:
        table = row["table"]
        summary = by_table.setdefault(
            table,
            {"table": table, "message_type": row["message_type"], "failed_by_expectation": {}},
        )
        # A batch is one stream's (`source`) micro-batch: several silver streams (one per
        # bronze table) validate the same silver table under the same batch ids.
        batch = per_batch.setdefault(
            (table, row["source"] or "", row["batch_id"]),
            {
                "checked": row["rows_checked"] or 0,
                "quarantined": row["rows_quarantined"] or 0,
                "rejected": False,
            },
        )
        if not row["success"]:
            if row["policy"] == "fail":
                batch["rejected"] = True
            entry = summary["failed_by_expectation"].setdefault(
                row["expectation"],
                {"policy": row["policy"], "failed_batches": 0, "unexpected_rows": 0},
            )
            entry["failed_batches"] += 1
            entry["unexpected_rows"] += row["unexpected_count"] or 0
    totals: dict[str, dict[str, int]] = defaultdict(
        lambda: {"batches": 0, "checked": 0, "passed": 0, "quarantined": 0, "failed_batches": 0}
    )
    for (table, _, _), batch in per_batch.items():
        if batch["checked"] == 0 and not batch["rejected"]:
            continue  # a stream whose batch held no record of this table: nothing was checked
        t = totals[table]
        t["batches"] += 1
        t["checked"] += batch["checked"]
        if batch["rejected"]:
            t["failed_batches"] += 1
        else:
            t["quarantined"] += batch["quarantined"]
            t["passed"] += batch["checked"] - batch["quarantined"]
    out = []
    for table in sorted(by_table):
        summary = by_table[table]
        summary.update(totals[table])
        summary["failed_by_expectation"] = dict(sorted(summary["failed_by_expectation"].items()))
        out.append(summary)
    return out


def format_observed(result: dict[str, Any]) -> str | None:
    """GE's observed value, else a sample of unexpected values, as a short string."""
    if "observed_value" in result:
        return _json(result["observed_value"])
    if result.get("unexpected_count"):
        sample = (result.get("partial_unexpected_list") or [])[:5]
        return f"unexpected e.g. {_json(sample)}"
    return None


def _json(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    try:
        return json.dumps(value, default=str, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def _sql_str(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _is_delta_table(path: str) -> bool:
    local = path[len("file://") :] if path.startswith("file://") else path
    if "://" in local:
        return True  # remote store: let Spark say whether it exists
    return (Path(local) / "_delta_log").is_dir()
