"""``airflow dags test protolake_ingest`` against the real broker and registry: a fresh Airflow
(SQLite) runs bronze and silver through SparkSubmitOperator (local[2]) on a small demo stream;
the silver tables hold what the stream holds, bronze = silver + quarantine record by record,
the silver tables are published as assets, and running the same date again changes nothing
and submits no Spark job (both are caught up). The Delta-log and checkpoint readers of the
DAGs are checked against what Spark reads."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lakehouse.layout import Layout
from pipelines.demo.produce import produce_demo_stream
from pipelines.quarantine import check_invariant
from tests.support.airflow_kit import make_airflow

pytestmark = pytest.mark.integration

RECORDS = 200
LOGICAL_DATE = "2026-11-22"

READ_LAKEHOUSE = """
import json, os
from protolake_support.environment import config_path
from protolake_support.progress import judge_stream, stream_parts
from protolake_support.tables import lakehouse_counts, silver_versions
config = config_path()
out = {"counts": lakehouse_counts(config), "versions": silver_versions(config), "streams": {}}
for job in ("bronze", "silver"):
    parts = stream_parts(job, config)
    health = judge_stream(job, None, parts, 60.0)
    out["streams"][job] = {
        "parts": [[n, p.last_commit_batch if p else None, lag] for n, p, lag in parts],
        "verdict": health.verdict,
        "lag": health.lag,
    }
print(json.dumps(out))
"""


def dag_run_state(output: str, dag_id: str = "protolake_ingest") -> str:
    """The final state ``airflow dags test`` reports (its exit code is 0 either way)."""
    found = re.findall(rf"DagRun Finished: dag_id={dag_id}, .*?state=(\w+)", output)
    assert found, output[-5000:]
    return found[-1]


def silver_asset_events(home: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(home / "airflow.db") as db:
        rows = db.execute(
            "SELECT a.uri, e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "WHERE a.uri LIKE 'protolake://silver/%' ORDER BY a.uri"
        ).fetchall()
    return [(uri, extra) for uri, extra in rows]


def delta_versions(root: Path) -> dict[str, int]:
    out = {}
    for table in sorted(root.glob("*/*/_delta_log")):
        versions = [int(p.stem) for p in table.glob("*.json")]
        out[f"{table.parent.parent.name}/{table.parent.name}"] = max(versions)
    return out


def delta_operations(root: Path) -> dict[str, list[str]]:
    """Per table (``layer/name``), the operations its Delta log recorded, in commit order."""
    out = {}
    for log in sorted(root.glob("*/*/_delta_log")):
        ops = []
        for commit in sorted(log.glob("*.json"), key=lambda p: int(p.stem)):
            for line in commit.read_text().splitlines():
                info = json.loads(line).get("commitInfo")
                if info:
                    ops.append(info.get("operation", ""))
        out[f"{log.parent.parent.name}/{log.parent.name}"] = ops
    return out


def spark_counts(spark: Any, lake: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for layer in ("bronze", "silver", "quarantine"):
        out[layer] = {
            p.parent.name: spark.read.format("delta").load(str(p.parent)).count()
            for p in sorted((lake / layer).glob("*/_delta_log"))
        }
    return out


@pytest.mark.timeout(3000)  # a DAG run of two Spark jobs, a maintenance task, on 2 busy cores
def test_ingest_dag_lands_the_stream_and_a_second_run_changes_nothing(
    bootstrap: str, registry_url: str, topic_prefix: str, spark: Any, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    config = tmp_path / "protolake.toml"
    airflow = make_airflow(tmp_path / "airflow", config, registry_url, tmp_path / "streams")
    # Airflow's database is created while the stream is produced (neither needs the other)
    migrating = airflow.start("db", "migrate")
    try:
        summary = produce_demo_stream(
            bootstrap,
            registry_url,
            topic_prefix=topic_prefix,
            records=RECORDS,
            seed=11,
            poison_every=20,
        )
    finally:
        out, err = migrating.communicate(timeout=600)
    assert migrating.returncode == 0, out[-3000:] + err[-3000:]
    # two of the stream's topics (three message types, a framed key): the DAGs treat every
    # table alike, and each topic more is a query more in each submitted job
    stream = summary.on_topics([f"{topic_prefix}orders", f"{topic_prefix}customers"])
    topics = ", ".join(json.dumps(t) for t in stream.topics)
    config.write_text(
        f'[lakehouse]\npath = "{lake}"\n'
        f'[kafka]\nbootstrap_servers = "{bootstrap}"\ntopics = [{topics}]\n'
        '[registry]\nurl = "${env:PROTOLAKE_REGISTRY_URL}"\nmax_retries = 2\n'
        '[catalog]\nsilver_database = ""\n'
    )

    first = airflow.run("dags", "test", "protolake_ingest", LOGICAL_DATE)
    out1 = first.stdout + first.stderr
    assert first.returncode == 0, out1[-6000:]
    assert dag_run_state(out1) == "success", out1[-8000:]

    # what the stream holds is in the lakehouse, and nothing is lost or doubled
    report = check_invariant(spark, str(lake))
    assert report.holds, report.summary()
    assert report.bronze_records == stream.records
    silver = {
        p.parent.name: spark.read.format("delta").load(str(p.parent)).count()
        for p in (lake / "silver").glob("*/_delta_log")
    }
    # a table per message type with its records (StreamPart.silver_rows_by_table says why
    # only the tables with rows)
    assert {table: n for table, n in silver.items() if n} == stream.silver_rows_by_table(
        quarantine_rules=()
    )
    quarantined = {
        r[0]: r[1]
        for r in spark.read.format("delta")
        .load(Layout(str(lake)).quarantine)
        .groupBy("reason_code")
        .count()
        .collect()
    }
    assert quarantined == stream.expected_quarantine_by_reason(quarantine_rules=())

    # the summary task printed the counts, read from the Delta logs
    total = f"bronze {stream.records} vs silver {sum(silver.values())} + quarantine "
    assert total + f"{sum(quarantined.values())}: matches" in out1

    # one asset event per silver table, with the version the run left
    versions1 = delta_versions(lake)
    events1 = silver_asset_events(airflow.home)
    assert [uri for uri, _ in events1] == sorted(f"protolake://silver/{t}" for t in silver)
    for uri, extra in events1:
        table = uri.rsplit("/", 1)[-1]
        assert json.loads(extra)["delta_version"] == versions1[f"silver/{table}"]

    # the DAGs' own readers agree with Spark, and see caught-up checkpoints
    seen = airflow.python(READ_LAKEHOUSE)
    assert seen["counts"] == spark_counts(spark, lake)
    assert seen["versions"] == {
        k.split("/", 1)[1]: v for k, v in versions1.items() if k.startswith("silver/")
    }
    bronze_stream = seen["streams"]["bronze"]
    assert bronze_stream["lag"] == 0 and bronze_stream["parts"][0][1] is not None, bronze_stream
    silver_stream = seen["streams"]["silver"]
    assert sorted(p[0] for p in silver_stream["parts"]) == sorted(seen["counts"]["bronze"])
    assert silver_stream["lag"] == 0, silver_stream
    assert {s["verdict"] for s in seen["streams"].values()} == {"dead"}  # none was started

    # the same logical date again: same tables, same versions, no new asset events
    second = airflow.run("dags", "test", "protolake_ingest", LOGICAL_DATE)
    out2 = second.stdout + second.stderr
    assert second.returncode == 0, out2[-6000:]
    assert dag_run_state(out2) == "success", out2[-8000:]
    assert delta_versions(lake) == versions1
    assert silver_asset_events(airflow.home) == events1
    assert check_invariant(spark, str(lake)).bronze_records == stream.records
    assert "silver tables changed since the last publication: none" in out2
    # nothing new: neither job was submitted (the first run was)
    assert out1.count("Spark-Submit cmd") == 2, out1[-6000:]
    assert "Spark-Submit cmd" not in out2, out2[-6000:]
    assert "bronze has work (per_topic: never ran): submitting" in out1
    assert re.search(r"silver has work \([^:]+: never ran\): submitting", out1), out1[-6000:]
    for job in ("bronze", "silver"):
        assert f"{job} is caught up with its sources: nothing submitted" in out2, out2[-6000:]

    # a task of the maintenance DAG on the same lakehouse, through its SparkSubmitOperator:
    # OPTIMIZE compacts the quarantine table, VACUUM keeps a week; nothing is lost. (The whole
    # maintenance DAG is three more Spark submits: its order and arguments are checked in
    # tests/unit/dags, the maintain and replay commands in tests/integration/ops.)
    counts_before = spark_counts(spark, lake)
    assert "OPTIMIZE" not in delta_operations(lake)["quarantine/records"]
    maint = airflow.run(
        "tasks", "test", "protolake_maintenance", "maintain_quarantine", LOGICAL_DATE
    )
    out3 = maint.stdout + maint.stderr
    assert maint.returncode == 0, out3[-6000:]
    assert "OPTIMIZE" in delta_operations(lake)["quarantine/records"], out3[-4000:]
    assert spark_counts(spark, lake) == counts_before
    after = check_invariant(spark, str(lake))
    assert after.holds and after.bronze_records == stream.records


def test_row_counts_from_a_delta_log_with_a_checkpoint_match_spark(
    spark: Any, tmp_path: Path
) -> None:
    from lakehouse.row_counts import delta_row_count
    from lakehouse.store import Store

    path = str(tmp_path / "t")
    for i in range(12):  # a Parquet checkpoint every 10 commits (Delta's default interval)
        spark.range(i * 10, i * 10 + i + 1).write.format("delta").mode("append").save(path)
        if i == 0:
            interval = "'delta.checkpointInterval' = 10"
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({interval})")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 3 = 0")
    assert (tmp_path / "t" / "_delta_log" / "_last_checkpoint").is_file()
    assert delta_row_count(path, Store.local()) == spark.read.format("delta").load(path).count()
