"""Processing-time bronze and silver streams on the object store keep the tables they write
(``pipelines.stream_maintenance``): while their micro-batches land, each compacts and
vacuums its tables through its own driver and says so in its writer lease, and ``protolake
maintain`` of such a group steps aside (exit 0) instead of failing on the held lease, or
names why the stream's maintenance does not do what was asked. Every Kafka record is in
bronze once, and in silver or quarantine once, throughout."""

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
from pipelines import bronze, silver
from pipelines.naming import bronze_table_of_topic
from pipelines.ops import maintain as maintain_mod
from pipelines.quarantine import check_invariant
from pipelines.settings import parse_config
from pipelines.stream_maintenance import GROUPS_OF_JOB, NOTE
from tests.support.s3 import S3_FROM_ENV
from tests.support.stack import BOOTSTRAP, REGISTRY

pytestmark = pytest.mark.integration

RECORDS = 120  # values that are not Confluent-framed: silver quarantines every one
PER_BATCH = 20  # kafka.max_offsets_per_trigger: six micro-batches, a file each at least


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
        "registry": {"url": REGISTRY},
        "bronze": {"processing_interval": "1 second"},
        "silver": {"processing_interval": "1 second"},
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


def _note(spark: Any, layout: Layout, job: str) -> dict[str, Any]:
    """The maintenance note in ``job``'s writer lease ({}: none)."""
    lines = read_text_lines(spark, layout.writer_lease(job)) or []
    return json.loads("".join(lines) or "{}").get("notes", {}).get(NOTE, {})


def _operations(spark: Any, path: str) -> set[str]:
    return {h["operation"] for h in _history(spark, path)}


def test_streams_keep_their_tables_and_maintain_steps_aside(
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

    def run_bronze() -> None:  # as the command line runs it: awaited, its lease released
        try:
            bronze.run(cfg, "processing-time", spark=spark)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    job = threading.Thread(target=run_bronze, name="bronze-stream")
    job.start()
    followed = silver.run(cfg, "processing-time", spark=spark, await_termination=False)
    try:
        # each stream's maintainer passes, published in its writer lease
        for name in ("bronze", "silver"):
            note = _wait(
                f"{name}'s first pass",
                lambda n=name: _note(spark, layout, n).get("last_pass"),
                errors,
            )
            note = _note(spark, layout, name)
            assert note["groups"] == list(GROUPS_OF_JOB[name]) and note["failed"] == [], note
        _wait(
            "a VACUUM of the bronze table",
            lambda: "VACUUM END" in _operations(spark, table),
            errors,
        )

        # more batches land meanwhile; later passes compact them (no data change)
        _produce(topic, RECORDS, RECORDS)
        for path in (table, layout.quarantine):
            _wait(
                f"an OPTIMIZE of {path}", lambda p=path: "OPTIMIZE" in _operations(spark, p), errors
            )
        optimized = [h for h in _history(spark, table) if h["operation"] == "OPTIMIZE"]
        metrics = optimized[0]["operationMetrics"]
        assert int(metrics["numRemovedFiles"]) >= 2 and int(metrics["numAddedFiles"]) >= 1

        # protolake maintain of a group a stream keeps: skipped, exit 0, nothing done
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
        for group in ("bronze", "quarantine"):
            capsys.readouterr()
            assert (
                maintain_mod.run_from_args(
                    argparse.Namespace(**{**vars(args), "table_group": group})
                )
                == 0
            )
            said = json.loads(capsys.readouterr().out)
            assert said["group"] == group and "kept by the stream" in said["skipped"], said
        # asked for another retention than the stream's VACUUM keeps: refused, and why
        longer = argparse.Namespace(**{**vars(args), "retention_hours": 720.0})
        with pytest.raises(WriterLeaseError, match="keeping 168 h, not 720 h"):
            maintain_mod.run_from_args(longer)

        # every record landed once: in bronze, and in quarantine (none decodes)
        def all_landed() -> bool:
            report = check_invariant(spark, root)
            return report.holds and report.bronze_records == 2 * RECORDS

        _wait("every record in bronze and quarantine", all_landed, errors)
        rows = spark.read.format("delta").load(table)
        assert rows.count() == rows.select("offset").distinct().count() == 2 * RECORDS
    finally:
        followed.group.stop()
        if followed.maintainer is not None:
            followed.maintainer.stop()
        if followed.lease is not None:
            followed.lease.release()
        deadline = time.monotonic() + 60
        while job.is_alive() and not spark.streams.active and time.monotonic() < deadline:
            time.sleep(0.5)  # (a failure before the queries started ends the run by itself)
        for query in spark.streams.active:
            query.stop()
        job.join(timeout=120)
        admin.delete_topics([topic])
    assert not job.is_alive() and not errors, errors
    # the runs released their leases, and their maintainers ended with them
    for name in ("bronze", "silver"):
        assert read_text_lines(spark, layout.writer_lease(name)) is None
        assert not [t for t in threading.enumerate() if t.name == f"{name}-maintenance"]


def _toml(raw: dict[str, Any]) -> str:
    """``raw`` as TOML (strings, numbers, booleans and lists of strings)."""
    lines: list[str] = []
    for section, values in raw.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"
