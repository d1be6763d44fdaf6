"""protolake replay/status/audit/maintain and the metrics listener, on a lakehouse that bronze
and silver really wrote from Kafka (fixtures in conftest.py; tests run in file order and
share the lakehouse: later tests see what replay did)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lakehouse.layout import Layout
from lakehouse.lease import WriterLeaseError
from pipelines.cli import main as cli_main
from pipelines.naming import bronze_table_of_topic, table_name_for
from pipelines.ops import audit as audit_mod
from pipelines.ops import maintain as maintain_mod
from pipelines.ops import replay as replay_mod
from pipelines.ops import replay_state, retention
from pipelines.ops import status as status_mod
from pipelines.quarantine import RECORD_KEY, check_invariant
from pipelines.settings import parse_config
from tests.support.ops_itkit import LATE_RECORDS, LATE_SCHEMA, LATE_TYPE, Lakehouse

ROOT = Path(__file__).resolve().parents[3]

# Spark on a shared 2-core machine: the lakehouse fixture and maintain take minutes under load
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


def _quarantine(spark: Any, lake: Lakehouse) -> Any:
    return spark.read.format("delta").load(Layout(str(lake.root)).quarantine)


def _silver(spark: Any, lake: Lakehouse, message_type: str) -> Any:
    return spark.read.format("delta").load(f"{lake.root}/silver/{table_name_for(message_type)}")


def _version(spark: Any, path: str) -> int:
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(spark, path).history(1).collect()[0]["version"])


def _cli_json(capsys: Any, *argv: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = cli_main([*argv, "--json"])
    out = capsys.readouterr().out.strip().splitlines()
    return code, json.loads(out[-1])


def _scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+)(\{[^}]*\})? (\S+)$", line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def test_metrics_listener_exposes_silver_batches(lake: Lakehouse, spark: Any) -> None:
    late_query = f"silver_{bronze_table_of_topic(lake.late_topic)}"
    key = f'protolake_silver_quarantined_total{{query="{late_query}",reason="UNKNOWN_SCHEMA"}}'
    records_key = f'protolake_batch_records_total{{query="{late_query}"}}'
    deadline = time.monotonic() + 60
    metrics: dict[str, float] = {}
    while time.monotonic() < deadline:  # listener events arrive asynchronously
        metrics = _scrape(lake.metrics_port)
        if records_key in metrics:
            break
        time.sleep(1)
    assert metrics.get(key) == LATE_RECORDS
    assert metrics[records_key] == LATE_RECORDS
    # every silver query's records in = its bronze table's rows
    for topic in lake.demo.topics:
        table = bronze_table_of_topic(topic)
        rows = spark.read.format("delta").load(f"{lake.root}/bronze/{table}").count()
        assert metrics[f'protolake_batch_records_total{{query="silver_{table}"}}'] == rows
    decoded = sum(
        v
        for k, v in metrics.items()
        if k.startswith("protolake_silver_decoded_total")
        and any(f'"silver_{bronze_table_of_topic(t)}"' in k for t in lake.demo.topics)
    )
    assert decoded == lake.demo.well_formed
    bronze_lag = [
        v
        for k, v in metrics.items()
        if k.startswith("protolake_kafka_lag_records") and lake.prefix in k
    ]
    assert bronze_lag and all(v == 0 for v in bronze_lag)
    assert any(k.startswith("protolake_batch_duration_seconds_count") for k in metrics)


def test_status_lag_progress_quarantine_streams(lake: Lakehouse, spark: Any, capsys: Any) -> None:
    data = status_mod.status(spark, lake.cfg, show_progress=False)
    parts = {(p["topic"], p["partition"]): p for p in data["partitions"]}
    bronze_counts: Counter[str] = Counter()
    for (topic, _), p in parts.items():
        bronze_counts[topic] += p["bronze_records"]
        assert p["silver_pending"] == 0, p
        if topic == lake.tx_topic:
            assert p["kafka_lag"] == 1  # the last commit marker takes an offset
        else:
            assert p["kafka_lag"] == 0, p
            assert p["kafka_end_offset"] == p["bronze_latest_offset"] + 1
    for topic, n in lake.demo.per_topic.items():
        assert bronze_counts[topic] == n
    assert bronze_counts[lake.late_topic] == LATE_RECORDS
    assert bronze_counts[lake.tx_topic] == lake.tx_committed
    expected = Counter(lake.demo.poison_by_reason)
    expected["UNKNOWN_SCHEMA"] += LATE_RECORDS
    expected["BAD_MAGIC"] += lake.tx_committed  # "tx-..." text is not framed
    assert data["quarantine"]["by_reason"] == dict(expected)
    assert data["quarantine"]["replayed"] == 0
    streams = {(s["job"], s["stream"]): s for s in data["streams"]}
    assert ("bronze", "per_topic") in streams
    assert ("silver", bronze_table_of_topic(lake.late_topic)) in streams
    for s in streams.values():
        assert s["last_batch_id"] is not None and 0 <= s["age_seconds"] < 3600
    code, doc = _cli_json(capsys, "status", "--config", str(lake.config_file))
    assert code == 0
    assert doc["quarantine"]["by_reason"] == dict(expected)
    assert doc["totals"]["kafka_lag"] == 1
    capsys.readouterr()
    assert cli_main(["status", "--config", str(lake.config_file)]) == 0
    human = capsys.readouterr().out
    assert "UNKNOWN_SCHEMA" in human and lake.late_topic in human


def test_audit_holds_despite_transaction_gaps(lake: Lakehouse, spark: Any, capsys: Any) -> None:
    report = audit_mod.audit(spark, lake.cfg, show_progress=False)
    assert report.invariant.holds, report.invariant.summary()
    # the aborted transaction and two markers leave one gap of 4 offsets in the tx topic
    assert report.gaps.gaps == 1 and report.gaps.gap_offsets == 4
    assert report.gaps.missing == 0 and not report.gaps.unverified
    assert report.holds
    code, doc = _cli_json(capsys, "audit", "--config", str(lake.config_file))
    assert code == 0 and doc["holds"] is True


def test_replay_dry_run_changes_nothing(lake: Lakehouse, spark: Any, capsys: Any) -> None:
    qpath = Layout(str(lake.root)).quarantine
    before = _version(spark, qpath)
    code, doc = _cli_json(
        capsys,
        "replay",
        "--config",
        str(lake.config_file),
        "--reason",
        "unknown_schema",
        "--topic",
        lake.late_topic,
        "--dry-run",
    )
    assert code == 0
    assert doc["selected"] == LATE_RECORDS
    assert doc["selected_by_reason"] == {"UNKNOWN_SCHEMA": LATE_RECORDS}
    assert doc["replayed"] == 0 and doc["dry_run"] is True
    assert _version(spark, qpath) == before


def test_replay_that_lost_its_writer_lease_writes_nothing(lake: Lakehouse, spark: Any) -> None:
    """The lease is looked at before silver's write: lost there (another driver may write the
    tables now), the replay ends before writing anything."""
    qpath = Layout(str(lake.root)).quarantine
    before = _version(spark, qpath)
    asked: list[str] = []

    def lost() -> None:
        asked.append("lease")
        raise WriterLeaseError("s3a://b/lh/_writers/silver: lost; this driver stops writing")

    flt = replay_state.ReplayFilter(reasons=("UNKNOWN_SCHEMA",), topics=(lake.late_topic,))
    with pytest.raises(WriterLeaseError, match="this driver stops writing"):
        replay_mod.replay(spark, lake.cfg, flt, show_progress=False, still_writer=lost)
    assert asked == ["lease"]
    assert _version(spark, qpath) == before
    silver = Path(lake.root) / "silver" / table_name_for(LATE_TYPE)
    assert not silver.exists()


def test_replay_after_registering_the_missing_schema(
    lake: Lakehouse, spark: Any, capsys: Any
) -> None:
    qpath = Layout(str(lake.root)).quarantine
    sid = lake.registry.register(f"{lake.late_topic}-value", LATE_SCHEMA)
    assert sid == lake.late_schema_id
    flt = replay_state.ReplayFilter(reasons=("UNKNOWN_SCHEMA",), topics=(lake.late_topic,))

    # a replay that dies after writing silver, before marking quarantine
    version = _version(spark, qpath)
    pending = replay_state.select_pending(spark, str(lake.root), flt, version).cache()
    stats = pending.agg({"*": "count"}).first()
    assert stats[0] == LATE_RECORDS
    from pyspark.sql import functions as F  # noqa: N812

    h = pending.agg(F.sum(F.xxhash64(*RECORD_KEY).cast("decimal(38,0)"))).first()[0]
    app_id, batch_id = replay_state.selection_id(LATE_RECORDS, int(h))
    from pipelines.ops.common import progress

    with progress(False) as steps:
        replay_mod._run_silver(
            spark, lake.cfg, pending, app_id, batch_id, None, steps, replay_mod.ReplayReport()
        )
    pending.unpersist()
    assert _silver(spark, lake, LATE_TYPE).count() == LATE_RECORDS
    assert _version(spark, qpath) == version  # quarantine untouched so far

    # the re-run writes nothing twice and marks the rows
    late_table = f"{lake.root}/silver/{table_name_for(LATE_TYPE)}"
    silver_version = _version(spark, late_table)
    report = replay_mod.replay(spark, lake.cfg, flt, show_progress=False)
    assert report.already_in_silver == LATE_RECORDS and report.app_id == ""  # nothing written
    assert _version(spark, late_table) == silver_version
    assert report.selected == LATE_RECORDS and report.replayed == LATE_RECORDS
    assert report.still_failing == {} and report.unchanged == 0
    silver = _silver(spark, lake, LATE_TYPE)
    rows = {r["_kafka_offset"]: r for r in silver.collect()}
    assert len(rows) == LATE_RECORDS == silver.count()
    for off, r in rows.items():
        i = int(r["id"][1:])
        assert r["n"] == 100 + i and r["_schema_id"] == sid and r["_message_type"] == LATE_TYPE
        assert r["_kafka_topic"] == lake.late_topic
        assert off in lake.late_values
    q = _quarantine(spark, lake).filter(F.col("_kafka_topic") == lake.late_topic).collect()
    assert len(q) == LATE_RECORDS  # raw bytes kept
    for r in q:
        assert r["replay_outcome"] == "replayed" and r["replayed_at"] is not None
        assert r["reason_code"] == "UNKNOWN_SCHEMA"
        assert bytes(r["value"]) == lake.late_values[r["_kafka_offset"]]

    # replaying twice changes nothing
    silver_version = _version(spark, f"{lake.root}/silver/{table_name_for(LATE_TYPE)}")
    q_version = _version(spark, qpath)
    code, doc = _cli_json(
        capsys,
        "replay",
        "--config",
        str(lake.config_file),
        "--reason",
        "UNKNOWN_SCHEMA",
        "--topic",
        lake.late_topic,
    )
    assert code == 0 and doc["selected"] == 0 and doc["replayed"] == 0
    assert _version(spark, f"{lake.root}/silver/{table_name_for(LATE_TYPE)}") == silver_version
    assert _version(spark, qpath) == q_version

    inv = check_invariant(spark, str(lake.root))
    assert inv.holds, inv.summary()
    data = status_mod.status(spark, lake.cfg, check_kafka=False, show_progress=False)
    assert data["quarantine"]["replayed"] == LATE_RECORDS
    assert data["quarantine"]["by_reason"]["UNKNOWN_SCHEMA"] == lake.demo.poison_by_reason.get(
        "UNKNOWN_SCHEMA", 0
    )


def test_replay_of_records_that_still_fail_records_the_new_reason(
    lake: Lakehouse, spark: Any, capsys: Any
) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    orders = next(t for t in lake.demo.topics if t.endswith("orders"))
    before = (
        _quarantine(spark, lake)
        .filter((F.col("_kafka_topic") == orders) & F.col("replay_outcome").isNull())
        .groupBy("reason_code")
        .count()
        .collect()
    )
    expected = {r["reason_code"]: int(r["count"]) for r in before}
    assert expected  # the demo stream put poison records on the orders topic
    code, doc = _cli_json(
        capsys, "replay", "--config", str(lake.config_file), "--topic", orders, "--strict"
    )
    assert code == 1  # some records still fail
    assert doc["replayed"] == 0
    assert doc["still_failing"] == expected
    rows = _quarantine(spark, lake).filter(F.col("_kafka_topic") == orders).collect()
    assert sum(expected.values()) == len(rows)
    for r in rows:
        assert r["replay_outcome"] == r["reason_code"] and r["replayed_at"] is not None
    inv = check_invariant(spark, str(lake.root))
    assert inv.holds, inv.summary()
    # a later replay by the (new) reason picks them up again
    _, again = _cli_json(
        capsys,
        "replay",
        "--config",
        str(lake.config_file),
        "--topic",
        orders,
        "--reason",
        sorted(expected)[0],
        "--dry-run",
    )
    assert again["selected"] == expected[sorted(expected)[0]]


DAG_SUMMARY = """
import json, sys
from protolake_support.tables import format_counts, lakehouse_counts
counts = lakehouse_counts(sys.argv[1])
print(json.dumps({"counts": counts, "text": format_counts(counts)}))
"""


def test_ingest_dag_summary_counts_replayed_records_once(
    lake: Lakehouse, spark: Any, tmp_path: Path
) -> None:
    """After the replays above, quarantine holds replayed rows, rows whose replay failed and
    rows never replayed: the DAG's summary (Delta logs, no Spark) counts as status does."""
    from pyspark.sql import functions as F  # noqa: N812

    q = _quarantine(spark, lake)
    outcomes = {r[0] for r in q.select("replay_outcome").distinct().collect()}
    assert {None, "replayed"} < outcomes  # and at least one failure reason
    active = q.filter(F.col("replay_outcome").isNull() | (F.col("replay_outcome") != "replayed"))
    assert q.count() - active.count() == LATE_RECORDS
    status = status_mod.status(spark, lake.cfg, check_kafka=False, show_progress=False)
    assert sum(status["quarantine"]["by_reason"].values()) == active.count()

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PROTOLAKE_"))}
    env |= {
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "dags"), str(ROOT)]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", DAG_SUMMARY, str(lake.config_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["counts"]["quarantine"] == {"records": active.count()}
    bronze = sum(seen["counts"]["bronze"].values())
    silver = sum(seen["counts"]["silver"].values())
    assert bronze == silver + active.count()
    assert (
        f"bronze {bronze} vs silver {silver} + quarantine {active.count()}: matches"
        in (seen["text"])
    )


def _copy(lake: Lakehouse, spark: Any, tmp_path: Path) -> Any:
    target = tmp_path / "lakehouse"
    shutil.copytree(lake.root, target)
    raw = {
        "lakehouse": {"path": str(target)},
        "kafka": {
            "bootstrap_servers": lake.cfg.kafka.bootstrap_servers,
            "topics": list(lake.cfg.kafka.topics),
        },
        "registry": {"url": lake.registry.url},
        "catalog": {
            "bronze_database": "",
            "silver_database": "",
            "quarantine_database": "",
            "quality_database": "",
        },
    }
    return parse_config(raw)


def test_audit_names_offending_records(lake: Lakehouse, spark: Any, tmp_path: Path) -> None:
    from delta.tables import DeltaTable

    cfg = _copy(lake, spark, tmp_path)
    root = cfg.lakehouse_path
    orders = next(t for t in lake.demo.topics if t.endswith("orders"))
    btable = f"{root}/bronze/{bronze_table_of_topic(orders)}"
    # a record lost from bronze (Kafka still has it) and one lost from silver
    row = spark.read.format("delta").load(btable).orderBy("partition", "offset").collect()[1]
    DeltaTable.forPath(spark, btable).delete(
        f"partition = {row['partition']} AND offset = {row['offset']}"
    )
    late_table = f"{root}/silver/{table_name_for(LATE_TYPE)}"
    gone = spark.read.format("delta").load(late_table).orderBy("_kafka_offset").first()
    DeltaTable.forPath(spark, late_table).delete(f"_kafka_offset = {gone['_kafka_offset']}")

    report = audit_mod.audit(spark, cfg, show_progress=False)
    assert not report.holds
    assert report.gaps.readable == {(orders, row["partition"]): [row["offset"]]}
    doc = report.to_dict()
    assert doc["kafka"]["offenders"] == [
        {
            "topic": orders,
            "partition": row["partition"],
            "offset": row["offset"],
            "found_in": ["kafka"],
        }
    ]
    orphans = doc["invariant"]["offenders"]["orphans"]
    assert [(o["topic"], o["partition"], o["offset"]) for o in orphans] == [
        (orders, row["partition"], row["offset"])
    ]
    missing = doc["invariant"]["offenders"]["missing"]
    assert [(o["topic"], o["offset"]) for o in missing] == [
        (lake.late_topic, gone["_kafka_offset"])
    ]


def _split_into_files(spark: Any, table: str, parts: int) -> tuple[int, int]:
    """Rewrite the Delta table ``table`` in ``parts`` parts of the same rows (no data change):
    as many files, or more when the table is partitioned; returns (files replaced, files now)."""
    from delta.tables import DeltaTable

    def files() -> int:
        return int(DeltaTable.forPath(spark, table).detail().first()["numFiles"])

    replaced = files()
    rows = spark.read.format("delta").load(table)
    rows.repartition(parts).write.format("delta").mode("overwrite").option(
        "dataChange", "false"
    ).save(table)
    return replaced, files()


def test_maintain_optimizes_and_vacuums_safely(
    lake: Lakehouse, spark: Any, tmp_path: Path, capsys: Any
) -> None:
    cfg = _copy(lake, spark, tmp_path)
    root = cfg.lakehouse_path
    # A bronze batch writes a table's rows in as many files as the session has cores, or fewer
    # (the parts mix the batch's topics' partitions as they fall): the orders table is split
    # into three files first, its rows as they were, so that OPTIMIZE always has files to join.
    orders = next(t for t in lake.demo.topics if t.endswith("orders"))
    split_away, split_files = _split_into_files(
        spark, Layout(root).bronze_table(bronze_table_of_topic(orders)), 3
    )
    assert split_files >= 3
    before = check_invariant(spark, root)
    with pytest.raises(retention.RetentionRefusedError):
        maintain_mod.maintain(spark, root, retention_hours=1, show_progress=False)
    assert cli_main(["maintain", "--config", str(lake.config_file), "--retention-hours", "2"]) == 2
    n_silver = len(maintain_mod.tables_of(spark, root, "silver"))
    assert n_silver >= len(lake.demo.per_message_type)
    # bronze tables, silver tables, the quarantine, and quality/results (every silver table is
    # checked, so the results table exists)
    assert (
        len(maintain_mod.tables_of(spark, root, "all")) == len(lake.cfg.kafka.topics) + n_silver + 2
    )

    dry = maintain_mod.maintain(spark, root, group="quarantine", dry_run=True, show_progress=False)
    assert [t["table"].rsplit("/", 2)[-2:] for t in dry["tables"]] == [["quarantine", "records"]]
    # replay's MERGE replaced files, but less than 168 h ago: nothing to delete yet
    assert (
        dry["tables"][0]["vacuum"] == {"files_to_delete": 0} and "optimize" not in dry["tables"][0]
    )

    real = maintain_mod.maintain(spark, root, group="bronze", show_progress=False)
    assert not real["failed"] and len(real["tables"]) == len(lake.cfg.kafka.topics)
    compacted = {
        t["table"].rsplit("/", 1)[-1]: t["optimize"]["files_removed"]
        for t in real["tables"]
        if t["optimize"]["files_removed"] > 1
    }
    # all its files joined (of a date with one file left, when the rows span midnight, all but it)
    assert 1 < compacted.get(bronze_table_of_topic(orders), 0) <= split_files, real["tables"]
    for t in real["tables"]:
        assert t["files_after"] <= t["files_before"]
        assert t["vacuum"]["files_deleted"] == 0  # nothing older than 168 h
    after = check_invariant(spark, root)
    assert after.holds and after.bronze_records == before.bronze_records

    forced = maintain_mod.maintain(
        spark,
        root,
        group="bronze",
        retention_hours=0,
        force_retention=True,
        optimize=False,
        show_progress=False,
    )
    assert forced["forced_retention"] is True
    # the files OPTIMIZE joined, and those the split replaced
    assert sum(t["vacuum"]["files_deleted"] for t in forced["tables"]) == split_away + sum(
        t["optimize"]["files_removed"] for t in real["tables"]
    )
    assert check_invariant(spark, root).bronze_records == before.bronze_records
    # Delta's check is the session's again (it had none of its own)
    assert spark.conf.get(retention.RETENTION_CHECK_CONF, None) is None


def test_sql_queries_the_tables_by_name(lake: Lakehouse, spark: Any, capsys: Any) -> None:
    some_type = sorted(lake.demo.per_message_type)[0]
    table = table_name_for(some_type)
    code, doc = _cli_json(
        capsys,
        "sql",
        "--config",
        str(lake.config_file),
        f"SELECT _kafka_topic, count(*) AS n FROM silver.{table} GROUP BY _kafka_topic",
    )
    assert code == 0 and doc["columns"] == ["_kafka_topic", "n"] and not doc["truncated"]
    by_path = Counter(r["_kafka_topic"] for r in _silver(spark, lake, some_type).collect())
    assert {r["_kafka_topic"]: r["n"] for r in doc["rows"]} == dict(by_path)

    # the quarantine by reason, as status counts it; --limit cuts and says so
    code, doc = _cli_json(
        capsys,
        "sql",
        "--config",
        str(lake.config_file),
        "--limit",
        "1",
        "SELECT reason_code, count(*) AS n FROM quarantine.records GROUP BY reason_code ORDER BY n DESC",
    )
    reasons = Counter(r["reason_code"] for r in _quarantine(spark, lake).collect())
    assert code == 0 and doc["truncated"] and len(doc["rows"]) == 1
    assert doc["rows"][0]["n"] == max(reasons.values())

    code, doc = _cli_json(capsys, "sql", "--config", str(lake.config_file), "--tables")
    names = {t["name"]: t for t in doc["tables"]}
    assert names[f"silver.{table}"]["rows"] == sum(by_path.values())
    assert names["quarantine.records"]["rows"] == sum(reasons.values())
    assert f"bronze.{bronze_table_of_topic(lake.late_topic)}" in names

    # a bad query is a clear error, exit 2
    capsys.readouterr()
    assert (
        cli_main(["sql", "--config", str(lake.config_file), "SELECT nope FROM quarantine.records"])
        == 2
    )
    err = capsys.readouterr().err
    assert "protolake sql: the query failed:" in err and "nope" in err


def test_sql_bad_query_is_one_line_on_stderr(tmp_path: Path) -> None:
    # Run as a user does, in its own process: pyspark logs query errors through a handler bound
    # to the stderr of the moment its logger was made, which capsys cannot be trusted to see.
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[lakehouse]\npath = "{tmp_path / "lake"}"\n'
        '[kafka]\nbootstrap_servers = "127.0.0.1:1"\ntopics = ["t"]\n'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "sql", "--config", str(cfg), "SELECT nope"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("protolake sql: the query failed: [UNRESOLVED_COLUMN")
    assert "`nope`" in lines[-1]
    # no JSON log of the error, no stack frames: what precedes the line is the JVM's start-up
    # banner (the same for every command), nothing about the query
    assert not [line for line in lines[:-1] if "nope" in line], proc.stderr[-3000:]
    for marker in ("SQLQueryContextLogger", "Traceback", "\tat ", "Py4JJavaError"):
        assert marker not in proc.stderr, proc.stderr[-3000:]
    assert len(proc.stderr) < 2000, proc.stderr[-3000:]
    assert proc.stdout == ""
