"""Read the lakehouse into a :class:`pipelines.demo.report.DemoReport`, with Spark.

:func:`collect_report` fills, in this order: every Delta table of each layer with its row
count (from its Delta log's statistics, read by ``deltalake``: no Spark job per table);
bronze rows of the demo topics; silver rows per message type and quarantine rows per reason
(demo topics only, replayed rows not counted); the invariant bronze = silver + quarantine,
record by record (:func:`pipelines.quarantine.check_invariant`); the quality
summary and the ``DQ_FAILED`` rows of quarantine (over every topic, as the quality results
are); the Data Docs page; an example query and its result. Then it evaluates the checks.
Every path comes from :class:`lakehouse.layout.Layout`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lakehouse.checkpoints import read_text_lines
from lakehouse.layout import LAYERS, Layout, table_name
from lakehouse.row_counts import delta_row_count
from lakehouse.store import Store
from lakehouse.tables import list_delta_tables
from pipelines.demo.produce import first_line
from pipelines.demo.report import DemoReport, evaluate_checks
from pipelines.naming import bronze_table_of_topic, table_name_for
from pipelines.settings import ProtolakeConfig
from pipelines.settings.object_store import lakehouse_store


def collect_report(spark: Any, cfg: ProtolakeConfig, report: DemoReport) -> None:
    """Fill ``report`` from the lakehouse (tables, counts, invariant, quality, SQL)."""
    layout = Layout(cfg.lakehouse_path)
    store = lakehouse_store(cfg)
    for layer in LAYERS:
        for path in list_delta_tables(layout.layer(layer), spark):
            report.tables.append(
                {
                    "layer": layer,
                    "table": table_name(path),
                    "path": path,
                    "rows": _table_rows(spark, path, store),
                }
            )
    bronze_names = {bronze_table_of_topic(t) for t in report.topics}
    bronze_paths = [
        t["path"] for t in report.tables if t["layer"] == "bronze" and t["table"] in bronze_names
    ]
    if bronze_paths:
        report.bronze_rows = _count_bronze(spark, bronze_paths, report.topics)
    silver_paths = [t["path"] for t in report.tables if t["layer"] == "silver"]
    if "silver" in report.stages or silver_paths:
        report.silver_by_type = _count_silver(spark, silver_paths, report.topics)
        report.quarantine_by_reason = {}
        if any(t["layer"] == "quarantine" for t in report.tables):
            report.quarantine_by_reason = _count_quarantine(spark, layout, report.topics)
        if bronze_paths:
            report.invariant = _invariant(spark, layout, bronze_paths)
    _collect_quality(spark, layout, report)
    _collect_sql(spark, cfg, report)
    evaluate_checks(report)


def _table_rows(spark: Any, path: str, store: Store | None) -> int:
    """The rows of a Delta table: from its log's statistics when ``store`` reads it (no Spark
    job), else (or for a file written without statistics) counted by Spark."""
    rows = delta_row_count(path, store) if store is not None else None
    if rows is None:
        rows = int(spark.read.format("delta").load(path).count())
    return rows


def _count_bronze(spark: Any, paths: Sequence[str], topics: Sequence[str]) -> int:
    from pyspark.sql import functions as F  # noqa: N812

    return sum(
        spark.read.format("delta").load(path).filter(F.col("topic").isin(topics)).count()
        for path in paths
    )


def _count_silver(spark: Any, paths: Sequence[str], topics: Sequence[str]) -> dict[str, int]:
    from pyspark.sql import functions as F  # noqa: N812

    by_type: dict[str, int] = {}
    for path in paths:
        rows = (
            spark.read.format("delta")
            .load(path)
            .filter(F.col("_kafka_topic").isin(topics))
            .groupBy("_message_type")
            .count()
            .collect()
        )
        for row in rows:
            name = row["_message_type"]
            by_type[name] = by_type.get(name, 0) + int(row["count"])
    return dict(sorted(by_type.items()))


def _count_quarantine(spark: Any, layout: Layout, topics: Sequence[str]) -> dict[str, int]:
    from pyspark.sql import functions as F  # noqa: N812

    from pipelines.quarantine import still_quarantined

    rows = (
        spark.read.format("delta")
        .load(layout.quarantine)
        .filter(F.col("_kafka_topic").isin(topics))
        .filter(still_quarantined())
        .groupBy("reason_code")
        .count()
        .collect()
    )
    return dict(sorted((row["reason_code"], int(row["count"])) for row in rows))


def _invariant(spark: Any, layout: Layout, bronze_paths: list[str]) -> dict[str, Any]:
    from pipelines.quarantine import check_invariant

    inv = check_invariant(spark, layout.root, bronze_tables=bronze_paths, sample=5)
    return {
        "holds": inv.holds,
        "bronze": inv.bronze_records,
        "silver": inv.silver_records,
        "quarantine": inv.quarantined_records,
        "missing": inv.missing,
        "in_both": inv.in_both,
        "duplicated": inv.duplicated,
        "orphans": inv.orphans,
        "bronze_duplicates": inv.bronze_duplicates,
        "offenders": inv.offenders,
    }


def _collect_quality(spark: Any, layout: Layout, report: DemoReport) -> None:
    from quality.results import summarize

    report.quality = list(summarize(spark, layout.root))
    if report.quality and any(t["layer"] == "quarantine" for t in report.tables):
        from pyspark.sql import functions as F  # noqa: N812

        from pipelines.quarantine import still_quarantined

        # Over every topic, as the quality results are: the two must tell the same story.
        report.dq_failed_rows = int(
            spark.read.format("delta")
            .load(layout.quarantine)
            .filter(F.col("reason_code") == "DQ_FAILED")
            .filter(still_quarantined())
            .count()
        )
    if layout.is_local:
        docs = layout.local_quality_docs() / "index.html"
        if docs.exists():
            report.data_docs = str(docs)
    elif read_text_lines(spark, f"{layout.quality_docs}/index.html") is not None:
        report.data_docs = f"{layout.quality_docs}/index.html"  # published there by silver


def _collect_sql(spark: Any, cfg: ProtolakeConfig, report: DemoReport) -> None:
    table = table_name_for("shop.v1.Order")
    match = [t for t in report.tables if t["layer"] == "silver" and t["table"] == table]
    if not match:
        return
    database = cfg.catalog.silver_database
    source = f"delta.`{match[0]['path']}`"
    try:
        if spark.catalog.tableExists(f"{database}.{table}"):
            source = f"{database}.{table}"
    except Exception:  # noqa: BLE001 - a catalog problem only changes how the query names the table
        pass
    query = (
        "SELECT status,\n"
        "       count(*)                                        AS orders,\n"
        "       sum(size(line_items))                           AS line_items,\n"
        "       round(sum(total.units + total.nanos / 1e9), 2)  AS revenue,\n"
        "       count(sales_channel)                            AS from_schema_v2\n"
        f"FROM {source}\n"
        "GROUP BY status\n"
        "ORDER BY orders DESC"
    )
    try:
        rows = [r.asDict() for r in spark.sql(query).collect()]
        report.sql = {"query": query, "rows": rows}
    except Exception as exc:  # noqa: BLE001 - the example is shown, its failure reported
        report.sql = {"query": query, "error": first_line(exc)}
