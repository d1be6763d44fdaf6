"""A processing-time bronze stream on the object store keeps the tables it writes
(``pipelines.stream_maintenance``): while its micro-batches land, it compacts and vacuums
them through its own driver, says so in its writer lease, and ``protolake maintain`` of that
group steps aside (exit 0) instead of failing on the held lease. Every Kafka record is in
bronze once throughout."""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from lakehouse.checkpoints import read_text_lines
from lakehouse.layout import Layout
from lakehouse.lease import WriterLeaseError
from lakehouse.tables import is_delta_table
from pipelines import bronze
from pipelines.naming import bronze_table_of_topic
from pipelines.ops import maintain as maintain_mod
from pipelines.settings import parse_config
from pipelines.stream_maintenance import NOTE
from tests.support.stack import BOOTSTRAP

pytestmark = pytest.mark.integration

RECORDS = 120
PER_BATCH = 20  # kafka.max_offsets_per_trigger: six micro-batches, a file each at least
S3_FROM_ENV = {
    "endpoint": "${env:AWS_ENDPOINT_URL}",
    "region": "${env:AWS_REGION}",
    "path_style_access": True,
    "access_key_id": "${env:AWS_ACCESS_KEY_ID}",
    "secret_access_key": "${env:AWS_SECRET_ACCESS_KEY}",
}


def _produce(topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": BOOTSTRAP})
    for i in range(start, start + count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0


def _raw_config(root: str, topic: str) -> dict[str, Any]:
    return {
        # renewed (and its notes put) every 10 s; shorter, a store's slow first puts (seconds
        # on a store just started) can take longer than the lease allows, and it is lost
        "lakehouse": {"path": root, "writer_lease_seconds": 40.0},
        "kafka": {
            "bootstrap_servers": BOOTSTRAP,
            "topics": [topic],
            "max_offsets_per_trigger": PER_BATCH,
        },
        "s3": S3_FROM_ENV,
        "bronze": {"processing_interval": "1 second"},
        # a pass every 6 s, with VACUUM every other pass or so
        "maintenance": {"stream_optimize_minutes": 0.1, "stream_vacuum_hours": 0.003},
    }


def _history(spark: Any, path: str) -> list[Any]:
    """The table's commits, newest first (none before its first)."""
    if not is_delta_table(path, spark):
        return []
    return spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()


def _wait(what: str, check: Any, errors: list[BaseException], timeout: float = 240.0) -> Any:
    """``check()``'s first true answer; fails at once when the stream's run failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert not errors, f"the stream's run failed: {errors!r}"
        found = check()
        if found:
            return found
        time.sleep(1.0)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_stream_keeps_its_tables_and_maintain_steps_aside(
    spark, s3_store, bucket, tmp_path, monkeypatch, capsys
):
    for key, value in s3_store.environment.items():
        monkeypatch.setenv(key, value)
    topic = f"s3it-maint-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    _produce(topic, 0, RECORDS)
    root = f"s3a://{bucket}/lh-{uuid.uuid4().hex[:6]}"
    raw = _raw_config(root, topic)
    cfg = parse_config(raw)
    layout = Layout(root)
    table = layout.bronze_table(bronze_table_of_topic(topic))
    errors: list[BaseException] = []

    def run() -> None:  # as the command line runs it: awaited, the lease released at the end
        try:
            bronze.run(cfg, "processing-time", spark=spark)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    job = threading.Thread(target=run, name="bronze-stream")
    job.start()
    try:
        # a pass of the stream's maintainer, published in its lease
        def a_pass() -> dict[str, Any] | None:
            lines = read_text_lines(spark, layout.writer_lease("bronze")) or []
            note = json.loads("".join(lines) or "{}").get("notes", {}).get(NOTE, {})
            return note if note.get("last_pass") else None

        note = _wait("the stream's first maintenance pass", a_pass, errors)
        assert note["groups"] == ["bronze"] and note["failed"] == [], note

        def vacuumed() -> bool:
            return any(h["operation"] == "VACUUM END" for h in _history(spark, table))

        _wait("a VACUUM of the bronze table", vacuumed, errors)

        # more batches land meanwhile; a later pass compacts them (no data change)
        _produce(topic, RECORDS, RECORDS)

        def compacted() -> list[Any]:
            return [h for h in _history(spark, table) if h["operation"] == "OPTIMIZE"]

        optimized = _wait("an OPTIMIZE commit", compacted, errors)
        metrics = optimized[0]["operationMetrics"]
        assert int(metrics["numRemovedFiles"]) >= 2 and int(metrics["numAddedFiles"]) >= 1

        # protolake maintain of the group the stream keeps: skipped, exit 0, nothing done
        config_file = tmp_path / "protolake.toml"
        config_file.write_text(_toml(raw))
        args = argparse.Namespace(
            config=str(config_file),
            table_group="bronze",
            retention_hours=168.0,
            force_retention=False,
            no_optimize=False,
            no_vacuum=False,
            dry_run=False,
            json=True,
        )
        capsys.readouterr()
        assert maintain_mod.run_from_args(args) == 0
        said = json.loads(capsys.readouterr().out)
        assert said["group"] == "bronze" and "kept by the stream" in said["skipped"], said
        # asked for another retention than the stream's VACUUM keeps: refused, and why
        longer = argparse.Namespace(**{**vars(args), "retention_hours": 720.0})
        with pytest.raises(WriterLeaseError, match="keeping 168 h, not 720 h"):
            maintain_mod.run_from_args(longer)
        # the silver group is no one's here: maintain takes its lease and runs (no tables)
        silver_args = argparse.Namespace(**{**vars(args), "table_group": "silver"})
        assert maintain_mod.run_from_args(silver_args) == 0
        assert json.loads(capsys.readouterr().out)["tables"] == []

        # every record landed once, compaction or not
        def all_landed() -> bool:
            return spark.read.format("delta").load(table).count() >= 2 * RECORDS

        _wait("every record in bronze", all_landed, errors)
        rows = spark.read.format("delta").load(table)
        assert rows.count() == 2 * RECORDS
        assert rows.select("offset").distinct().count() == 2 * RECORDS
    finally:
        deadline = time.monotonic() + 60
        while job.is_alive() and not spark.streams.active and time.monotonic() < deadline:
            time.sleep(0.5)  # (a failure before the queries started ends the run by itself)
        for query in spark.streams.active:
            query.stop()
        job.join(timeout=120)
        admin.delete_topics([topic])
    assert not job.is_alive() and not errors, errors
    # the run released its lease, and its maintainer ended with it
    assert read_text_lines(spark, layout.writer_lease("bronze")) is None
    assert not [t for t in threading.enumerate() if t.name == "bronze-maintenance"]


def _toml(raw: dict[str, Any]) -> str:
    """``raw`` as TOML (strings, numbers, booleans and lists of strings)."""
    lines: list[str] = []
    for section, values in raw.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"
