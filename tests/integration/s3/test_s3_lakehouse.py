"""Bronze and silver with the lakehouse on the stack's S3 store (``s3a://bucket/lh``): the
demo stream lands record by record (bronze = silver + quarantine), delta-rs reads the same
tables from the store, the stack's SQL endpoint queries them by name, quality results and
Data Docs are in the lakehouse, and a second run changes nothing.

The jobs read two of the demo's topics (orders, with its poison records, and customers):
each topic more is a bronze table and a silver query more per run, and the store is what
these tests are about, not the number of tables."""

from __future__ import annotations

import dataclasses
import os
import uuid
from typing import Any

import pytest

from lakehouse.checkpoints import read_text_lines
from lakehouse.layout import Layout, table_name
from lakehouse.tables import list_delta_tables, table_version
from pipelines import bronze, silver
from pipelines.demo.config import load_demo_config
from pipelines.demo.produce import produce_demo_stream
from pipelines.quarantine import check_invariant
from pipelines.settings.object_store import delta_storage_options
from tests.support.sql_endpoint import hive

pytestmark = pytest.mark.integration

RECORDS = 300
POISON_EVERY = 20


def run_stages(spark: Any, cfg: Any) -> None:
    bronze.run(cfg, "available-now", spark=spark)
    silver.run(cfg, "available-now", spark=spark)


@pytest.fixture(scope="module")
def landed(
    spark, s3_store, bucket, bootstrap, registry_url, topic_prefix_factory, tmp_path_factory
):
    prefix = topic_prefix_factory()
    stream = produce_demo_stream(
        bootstrap,
        registry_url,
        topic_prefix=prefix,
        records=RECORDS,
        seed=11,
        poison_every=POISON_EVERY,
        cache_dir=tmp_path_factory.mktemp("schemas"),
    )
    part = stream.on_topics([f"{prefix}orders", f"{prefix}customers"])
    assert part.poison_by_reason, "the replay test below replays the orders' poison records"
    env = {
        **os.environ,
        **s3_store.environment,
        "PROTOLAKE_KAFKA_BOOTSTRAP": bootstrap,
        "PROTOLAKE_REGISTRY_URL": registry_url,
    }
    cfg = load_demo_config(lakehouse=f"s3a://{bucket}/lh", topic_prefix=prefix, env=env)
    catalog = dataclasses.replace(cfg.catalog, silver_database=f"s3it_{uuid.uuid4().hex[:8]}")
    kafka = dataclasses.replace(cfg.kafka, topics=tuple(part.topics))
    cfg = dataclasses.replace(cfg, catalog=catalog, kafka=kafka)
    run_stages(spark, cfg)
    return cfg, part


def test_every_record_lands_once_on_the_object_store(spark, landed, s3_store, bucket):
    cfg, part = landed
    layout = Layout(cfg.lakehouse_path)
    report = check_invariant(spark, layout.root)
    assert report.holds, report.offenders
    assert report.bronze_records == part.records
    assert report.silver_records + report.quarantined_records == part.records
    keys = s3_store.keys(bucket, "lh")
    for folder in ("bronze/", "silver/", "quarantine/records/_delta_log/", "_checkpoints/"):
        assert any(k.startswith(f"{bucket}/lh/{folder}") for k in keys), folder


def test_delta_rs_reads_the_same_tables_from_the_store(spark, landed):
    from deltalake import DeltaTable

    cfg, part = landed
    layout = Layout(cfg.lakehouse_path)
    options = delta_storage_options(cfg)
    rows_by_table = {}
    for path in list_delta_tables(layout.silver, spark):
        rs = DeltaTable(path, storage_options=options)
        assert rs.version() == table_version(path, spark)
        rows_by_table[table_name(path)] = rs.to_pyarrow_table().num_rows
    # the tables that hold rows (StreamPart.silver_rows_by_table says why)
    assert {name: n for name, n in rows_by_table.items() if n} == part.silver_rows_by_table()
    bronze_rows = sum(
        DeltaTable(p, storage_options=options).to_pyarrow_table().num_rows
        for p in list_delta_tables(layout.bronze, spark)
    )
    assert bronze_rows == part.records
    quarantine = DeltaTable(layout.quarantine, storage_options=options).to_pyarrow_table()
    assert quarantine.num_rows == sum(part.expected_quarantine_by_reason().values())


def test_the_sql_endpoint_queries_the_tables_on_the_object_store(spark, landed):
    """The analysts' path: tables registered through the stack's Thrift Server by their s3a://
    location in the shared metastore (the statement the jobs' registration runs, ``CREATE
    TABLE ... USING delta LOCATION``), then read by it from the store with Spark's counts."""
    cfg, _ = landed
    layout = Layout(cfg.lakehouse_path)
    paths = [*list_delta_tables(layout.silver, spark), layout.quarantine]
    expected = {table_name(p): spark.read.format("delta").load(p).count() for p in paths}
    database = f"s3sql_{uuid.uuid4().hex[:8]}"
    with hive() as cur:
        cur.execute(f"CREATE DATABASE {database}")
        try:
            for path in paths:
                cur.execute(
                    f"CREATE TABLE {database}.{table_name(path)} USING delta LOCATION '{path}'"
                )
            counted = {}
            for name in expected:
                cur.execute(f"SELECT count(*) FROM {database}.{name}")
                counted[name] = cur.fetchall()[0][0]
            cur.execute(f"DESCRIBE DETAIL {database}.records")
            detail = dict(zip([c[0] for c in cur.description], cur.fetchall()[0], strict=True))
        finally:
            cur.execute(f"DROP DATABASE IF EXISTS {database} CASCADE")
    assert counted == expected
    assert sum(expected.values()) > 0
    assert detail["location"] == layout.quarantine


def test_quality_results_and_data_docs_are_in_the_lakehouse(spark, landed):
    from deltalake import DeltaTable

    cfg, _ = landed
    layout = Layout(cfg.lakehouse_path)
    results = DeltaTable(layout.quality_results, storage_options=delta_storage_options(cfg))
    assert results.to_pyarrow_table().num_rows > 0
    index = read_text_lines(spark, f"{layout.quality_docs}/index.html")
    assert index is not None and any("protolake" in line.lower() for line in index)


def test_a_second_run_changes_nothing(spark, landed):
    cfg, _ = landed
    layout = Layout(cfg.lakehouse_path)
    tables = [
        *list_delta_tables(layout.bronze, spark),
        *list_delta_tables(layout.silver, spark),
        layout.quarantine,
    ]
    before = {p: table_version(p, spark) for p in tables}
    run_stages(spark, cfg)
    assert {p: table_version(p, spark) for p in tables} == before
    assert check_invariant(spark, layout.root).holds


def test_the_ops_commands_work_on_the_object_store(spark, landed):
    """status, audit, replay (its state and its MERGE into the quarantine), sql and maintain
    on the lakehouse in the bucket: the same answers as on a local folder."""
    from pyspark.sql import functions as F  # noqa: N812

    from pipelines.ops import audit as audit_mod
    from pipelines.ops import maintain as maintain_mod
    from pipelines.ops import replay as replay_mod
    from pipelines.ops import sql as sql_mod
    from pipelines.ops import status as status_mod
    from pipelines.ops.replay_state import ReplayFilter

    cfg, part = landed
    layout = Layout(cfg.lakehouse_path)
    expected_quarantine = part.expected_quarantine_by_reason()

    data = status_mod.status(spark, cfg, show_progress=False)
    per_topic: dict[str, int] = {}
    for p in data["partitions"]:
        per_topic[p["topic"]] = per_topic.get(p["topic"], 0) + p["bronze_records"]
        assert p["kafka_lag"] == 0 and p["silver_pending"] == 0, p
    assert per_topic == part.per_topic
    assert data["quarantine"]["by_reason"] == expected_quarantine
    assert audit_mod.audit(spark, cfg, show_progress=False).holds

    quarantine = spark.read.format("delta").load(layout.quarantine)
    orders = next(t for t in part.topics if t.endswith("orders"))
    poison = {
        r["reason_code"]: int(r["count"])
        for r in quarantine.filter(
            (F.col("_kafka_topic") == orders) & (F.col("reason_code") != "DQ_FAILED")
        )
        .groupBy("reason_code")
        .count()
        .collect()
    }
    assert poison  # the demo stream puts poison records on the orders topic
    flt = ReplayFilter(reasons=tuple(sorted(poison)), topics=(orders,))
    report = replay_mod.replay(spark, cfg, flt, show_progress=False)
    assert report.replayed == 0 and report.still_failing == poison
    marked = quarantine.filter(F.col("replay_outcome").isNotNull()).count()
    assert marked == sum(poison.values())
    assert check_invariant(spark, layout.root).holds

    found = {t["name"]: t["path"] for t in sql_mod.register_lakehouse(spark, cfg)}
    name = next(n for n, p in found.items() if p == layout.quarantine)
    result = sql_mod.run_query(spark, f"SELECT count(*) AS n FROM {name}", limit=10)
    assert result["rows"] == [{"n": sum(expected_quarantine.values())}]

    done = maintain_mod.maintain(spark, layout.root, group="bronze", show_progress=False)
    assert not done["failed"] and len(done["tables"]) == len(part.topics)
    for t in done["tables"]:
        assert t["files_after"] <= t["files_before"]
        assert t["vacuum"]["files_deleted"] == 0  # nothing older than the safe retention
    assert check_invariant(spark, layout.root).bronze_records == part.records
