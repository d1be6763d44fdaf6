"""``python -m pipelines.demo`` end to end, as ``make demo`` runs it: a subprocess against the
real stack, with a temporary lakehouse and its own topics. The lakehouse is then read here,
with Spark, and compared with the stream the demo produced; a second run must change nothing.

The first run has Spark's own SQL settings, not the suite's (tests/spark-conf turns off code
generation and adaptive execution for speed): this is the suite's run of the pipeline with the
generated code deployments use; the second, whose subject is that nothing changes, has the
suite's. The first keeps only the suite's JVM options (the C1 compiler alone, the serial
collector) and, with the suite's class archive, Spark's jars first on the class path
(tests/support/jvm_archive.py): they change how much CPU the JVM spends on itself, never what
Spark computes nor where Delta and Kafka are loaded from.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from pipelines.demo.stream import DemoStreamSummary
from pipelines.naming import bronze_table_of_topic, table_name_for
from tests.conftest import TEST_SPARK_CONF_DIR
from tests.support import jvm_archive
from tests.support.stack import free_port

pytestmark = pytest.mark.integration

RECORDS = 300
POISON_EVERY = 20
RUN_TIMEOUT = 1200
# what tests/conftest.py sets for the suite's JVMs (tests/spark-conf); a caller's own stay
SUITE_SPARK_SETTINGS = {
    "SPARK_CONF_DIR": str(TEST_SPARK_CONF_DIR),
    **jvm_archive.daemon_settings(TEST_SPARK_CONF_DIR),
}


JVM_OPTIONS = jvm_archive.JAVA_OPTION_KEYS
# with the suite's class archive, the class path it needs
CLASS_PATH = jvm_archive.CLASS_PATH_KEYS


def jvm_options_only(folder: Path) -> Path:
    """A Spark conf folder with the JVM options (and class path) of the suite's
    spark-defaults.conf and nothing else of it."""
    suite = (TEST_SPARK_CONF_DIR / "spark-defaults.conf").read_text().splitlines()
    lines = [line for line in suite if line.startswith(JVM_OPTIONS + CLASS_PATH)]
    assert sum(line.startswith(JVM_OPTIONS) for line in lines) == len(JVM_OPTIONS), suite
    folder.mkdir(exist_ok=True)
    (folder / "spark-defaults.conf").write_text("\n".join(lines) + "\n")
    return folder


def run_demo(
    args: list[str], cwd: Path, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if SUITE_SPARK_SETTINGS.get(k) != v}
    if "SPARK_CONF_DIR" not in env:  # a caller's own stays
        env["SPARK_CONF_DIR"] = str(jvm_options_only(cwd / ".spark-conf"))
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "pipelines.demo", *args],
        cwd=cwd,  # a fresh directory: nothing is found by accident in the repository
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def topic_records(bootstrap: str, topics: list[str]) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo-e2e-probe"})
    try:
        meta = consumer.list_topics(timeout=10)
        total = 0
        for t in topics:
            for p in meta.topics[t].partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)
                total += high - low
        return total
    finally:
        consumer.close()


def test_a_stack_that_is_down_is_a_clear_error(tmp_path):
    proc = run_demo(
        ["--lakehouse", str(tmp_path / "lh")],
        tmp_path,
        {
            "PROTOLAKE_KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}",
            "PROTOLAKE_REGISTRY_URL": f"http://127.0.0.1:{free_port()}",
        },
    )
    assert proc.returncode == 1, proc.stderr
    assert "Kafka does not answer" in proc.stderr
    assert "schema registry does not answer" in proc.stderr
    assert "infra/stack.sh up" in proc.stderr
    assert not (tmp_path / "lh").exists(), "nothing is written when the stack is down"


@pytest.fixture(scope="module")
def first_run(bootstrap, registry_url, topic_prefix_factory, tmp_path_factory) -> dict[str, Any]:
    prefix = topic_prefix_factory()
    work = tmp_path_factory.mktemp("demo-e2e")
    lakehouse = work / "lakehouse"
    args = [
        "--lakehouse", str(lakehouse),
        "--topic-prefix", prefix,
        "--records", str(RECORDS),
        "--poison-every", str(POISON_EVERY),
        "--seed", "3",
    ]  # fmt: skip
    env = {"PROTOLAKE_KAFKA_BOOTSTRAP": bootstrap, "PROTOLAKE_REGISTRY_URL": registry_url}
    proc = run_demo([*args, "--json"], work, env)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-6000:]}"
    report = json.loads(proc.stdout)
    return {
        "prefix": prefix,
        "work": work,
        "lakehouse": lakehouse,
        "args": args,
        "env": env,
        "report": report,
        "summary": DemoStreamSummary.from_dict(report["produced"]),
    }


@pytest.mark.timeout(RUN_TIMEOUT + 300)
def test_first_run_produces_the_stream_and_every_check_passes(first_run, bootstrap):
    report, summary = first_run["report"], first_run["summary"]
    assert summary.records == RECORDS and summary.poison == RECORDS // POISON_EVERY
    assert summary.topic_prefix == first_run["prefix"]
    assert topic_records(bootstrap, summary.topics) == RECORDS
    assert report["ok"] is True
    assert set(report["checks"]) == {
        "bronze holds every record on the topics",
        "bronze = silver + quarantine",
        "silver rows per message type as the stream predicts",
        "quarantine by reason as the stream predicts",
        "the example query runs",
        "quality results count every DQ_FAILED row",
        "every silver table has quality results",
    }
    assert all(report["checks"].values())
    # the default suite checks every table, configured expectations or not (3 of the 6 types)
    checked = {q["table"] for q in report["quality"]}
    assert checked == {t["table"] for t in report["tables"] if t["layer"] == "silver"}
    assert len(checked) == 6
    stages = report["stages"]
    assert re.fullmatch(rf"{RECORDS} records -> 4 tables in [\d.]+ s", stages["bronze"]), stages
    silver_line = r"\d+ records -> 6 tables, \d+ quarantined in [\d.]+ s"
    assert re.fullmatch(silver_line, stages["silver"]), stages
    assert report["invariant"]["holds"] and report["invariant"]["bronze"] == RECORDS
    assert report["sql"]["rows"], report["sql"]
    assert report["data_docs"] and Path(report["data_docs"]).is_file()
    streams = json.loads((first_run["lakehouse"] / "_demo" / "streams.json").read_text())
    assert streams[first_run["prefix"]] == [report["produced"]]


def test_the_lakehouse_holds_the_produced_stream(first_run, spark):
    from pyspark.sql import functions as F  # noqa: N812

    summary: DemoStreamSummary = first_run["summary"]
    root = first_run["lakehouse"]
    topics = summary.topics
    bronze = None
    for topic in topics:
        df = spark.read.format("delta").load(str(root / "bronze" / bronze_table_of_topic(topic)))
        assert df.count() == summary.per_topic[topic], topic
        bronze = df if bronze is None else bronze.unionByName(df)
    assert bronze.select("topic", "partition", "offset").distinct().count() == RECORDS

    quantity_failures = summary.dq_violations["shop.v1.Order.LineItem.quantity between 1 and 100"]
    for name, produced in summary.per_message_type.items():
        table = spark.read.format("delta").load(str(root / "silver" / table_name_for(name)))
        expected = produced - (quantity_failures if name == "shop.v1.Order.LineItem" else 0)
        assert table.filter(F.col("_kafka_topic").isin(topics)).count() == expected, name
        assert {r[0] for r in table.select("_message_type").distinct().collect()} == {name}

    quarantine = spark.read.format("delta").load(str(root / "quarantine" / "records"))
    mine = quarantine.filter(F.col("_kafka_topic").isin(topics))
    by_reason = {
        r["reason_code"]: r["count"] for r in mine.groupBy("reason_code").count().collect()
    }
    assert by_reason == summary.expected_quarantine_by_reason()
    dq = mine.filter(F.col("reason_code") == "DQ_FAILED")
    assert {r[0] for r in dq.select("stage").distinct().collect()} == {"quality"}
    # The raw bytes are kept: the empty values are empty, the JSON records are JSON.
    empty = mine.filter(F.col("reason_code") == "EMPTY_VALUE").collect()
    assert len(empty) == summary.poison_by_kind["empty_value"]
    assert all(len(r["value"]) == 0 for r in empty)
    magic = mine.filter(F.col("reason_code") == "BAD_MAGIC").collect()
    assert (
        sum(bytes(r["value"]).startswith(b"{") for r in magic)
        == summary.poison_by_kind["plain_json"]
    )

    # Both schema versions of the order landed in one table, version 2's columns added.
    orders = spark.read.format("delta").load(str(root / "silver" / table_name_for("shop.v1.Order")))
    assert "sales_channel" in orders.columns
    ids = {r[0] for r in orders.select("_schema_id").distinct().collect()}
    assert ids == set(summary.schema_ids_by_type["shop.v1.Order"])


@pytest.mark.timeout(RUN_TIMEOUT + 300)
def test_a_second_run_produces_nothing_and_reports_the_same(first_run, bootstrap):
    # The first run is the suite's run with Spark's own SQL settings; what this one is about
    # is what it leaves as it was, so it takes the suite's settings (interpreted expressions:
    # the report's queries generate no code to compile); a caller's own settings stay.
    suite = {k: v for k, v in SUITE_SPARK_SETTINGS.items() if os.environ.get(k, v) == v}
    proc = run_demo(first_run["args"], first_run["work"], {**first_run["env"], **suite})
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-6000:]}"
    out = proc.stdout
    summary: DemoStreamSummary = first_run["summary"]
    assert topic_records(bootstrap, summary.topics) == RECORDS
    assert f"the topics already hold {RECORDS} records; nothing produced" in out
    for table in first_run["report"]["tables"]:
        if table["layer"] in ("bronze", "silver", "quarantine"):
            line = f"{table['layer'] + '/' + table['table']:<62} {table['rows']:>8} rows"
            assert line in out, line
    inv = first_run["report"]["invariant"]
    assert f"{inv['bronze']} = {inv['silver']} + {inv['quarantine']}  HOLDS" in out
    assert "[ok] bronze = silver + quarantine" in out
    assert "[ok] quarantine by reason as the stream predicts" in out
    assert "[FAILED]" not in out
    assert "Data Docs: file://" in out
    assert "FROM " in out and "GROUP BY status" in out
