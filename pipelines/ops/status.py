"""``protolake status``: where every stage stands, per topic partition.

    protolake status --config F [--no-kafka] [--json]

Sections (also the keys of the ``--json`` document):

- ``partitions``: per topic partition, Kafka's end offset (from a confluent-kafka consumer's
  ``get_watermark_offsets``, at bronze's isolation level: under ``read_committed`` the last
  stable offset), bronze's latest offset and record
  count, ``kafka_lag = end offset - (bronze latest + 1)`` (a transactional topic shows 1 when
  caught up: the commit marker takes an offset), and silver progress: records of that partition
  in silver or (not replayed) in quarantine, and ``silver_pending = bronze - that``.
  Topics are those in bronze plus the ones bronze subscribes to
  (:func:`pipelines.settings.clients.subscribed_topics`).
- ``quarantine``: records per current reason (``replay_outcome`` of a failed replay, else
  ``reason_code``), and how many were replayed into silver.
- ``quality``: :func:`quality.results.summarize` (per table: batches, rows checked, passed,
  quarantined, failures by expectation) and the time of the last validation.
- ``streams``: per streaming checkpoint (``_checkpoints/<job>/<name>``), the last committed
  batch id and the age in seconds of its commit file (the age of the stream's last batch).
"""

from __future__ import annotations

import argparse
import logging
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from lakehouse.checkpoints import newest_batch
from lakehouse.hadoop import hadoop_path
from lakehouse.layout import Layout
from lakehouse.tables import is_delta_table, list_delta_tables
from pipelines.ops.common import (
    effective_reason,
    emit,
    loaded_config,
    progress,
    table,
)
from pipelines.quarantine import still_quarantined
from pipelines.settings import ProtolakeConfig
from pipelines.settings.clients import (
    client_logging,
    kafka_client_conf,
    open_session,
    partition_watermarks,
    subscribed_topics,
)

log = logging.getLogger("pipelines.ops.status")


def kafka_offsets(
    cfg: ProtolakeConfig, topics: Sequence[str], timeout: float = 10.0
) -> dict[tuple[str, int], tuple[int, int]]:
    """(low, high) watermark per topic partition of ``topics`` plus the configured topics.

    Raises:
        RuntimeError: Kafka did not answer.
    """
    from confluent_kafka import Consumer, KafkaException

    conf = kafka_client_conf(cfg)
    consumer = Consumer(
        {**conf, **client_logging(), "group.id": f"protolake-status-{uuid.uuid4()}"}
    )
    try:
        try:
            meta = consumer.list_topics(timeout=timeout)
        except KafkaException as exc:
            raise RuntimeError(
                f"Kafka at {cfg.kafka.bootstrap_servers} did not answer: {exc}"
            ) from exc
        wanted = set(topics) | subscribed_topics(cfg, meta.topics)
        return partition_watermarks(consumer, meta, wanted, timeout)
    finally:
        consumer.close()


def bronze_progress(spark: Any, layout: Layout) -> dict[tuple[str, int], dict[str, int]]:
    """Per topic partition: bronze records and latest offset."""
    from pyspark.sql import functions as F  # noqa: N812

    out: dict[tuple[str, int], dict[str, int]] = {}
    for path in list_delta_tables(layout.bronze, spark):
        rows = (
            spark.read.format("delta")
            .load(path)
            .groupBy("topic", "partition")
            .agg(F.count(F.lit(1)).alias("n"), F.max("offset").alias("mx"))
            .collect()
        )
        for r in rows:
            entry = out.setdefault((r["topic"], int(r["partition"])), {"records": 0, "latest": -1})
            entry["records"] += int(r["n"])
            entry["latest"] = max(entry["latest"], int(r["mx"]))
    return out


def processed_counts(spark: Any, layout: Layout) -> dict[tuple[str, int], int]:
    """Per topic partition: records in silver tables plus records (still) in quarantine."""

    frames = [
        spark.read.format("delta").load(p).select("_kafka_topic", "_kafka_partition")
        for p in list_delta_tables(layout.silver, spark)
    ]
    qpath = layout.quarantine
    if is_delta_table(qpath, spark):
        q = spark.read.format("delta").load(qpath)
        frames.append(q.filter(still_quarantined()).select("_kafka_topic", "_kafka_partition"))
    if not frames:
        return {}
    df = frames[0]
    for f in frames[1:]:
        df = df.unionByName(f)
    return {
        (r[0], int(r[1])): int(r[2])
        for r in df.groupBy("_kafka_topic", "_kafka_partition").count().collect()
    }


def quarantine_summary(spark: Any, layout: Layout) -> dict[str, Any]:
    """Records per current reason, and replayed ones."""

    qpath = layout.quarantine
    if not is_delta_table(qpath, spark):
        return {"by_reason": {}, "active": 0, "replayed": 0}
    q = spark.read.format("delta").load(qpath)
    replayed = ~still_quarantined()
    by_reason: dict[str, int] = {}
    n_replayed = 0
    for r in (
        q.select(replayed.alias("r"), effective_reason().alias("reason"))
        .groupBy("r", "reason")
        .count()
        .collect()
    ):
        if r["r"]:
            n_replayed += int(r["count"])
        else:
            by_reason[r["reason"]] = by_reason.get(r["reason"], 0) + int(r["count"])
    return {
        "by_reason": dict(sorted(by_reason.items())),
        "active": sum(by_reason.values()),
        "replayed": n_replayed,
    }


def quality_summary(spark: Any, layout: Layout) -> dict[str, Any]:
    """``quality.results.summarize`` plus the time of the last validation."""
    from pyspark.sql import functions as F  # noqa: N812

    from quality.results import summarize

    tables = summarize(spark, layout.root)
    last = None
    if tables:
        results = spark.read.format("delta").load(layout.quality_results)
        row = results.agg(F.max("validated_at")).first()
        last = row[0] if row else None
    return {"tables": tables, "last_validated_at": last}


def stream_ages(spark: Any, layout: Layout, now: float | None = None) -> list[dict[str, Any]]:
    """Per checkpoint under ``_checkpoints/<job>/<name>``: last committed batch and its age."""
    jvm, base, fs = hadoop_path(spark, layout.checkpoints)
    now = time.time() if now is None else now
    out: list[dict[str, Any]] = []
    if not fs.exists(base):
        return out
    for job in fs.listStatus(base):
        if not job.isDirectory():
            continue
        for cp in fs.listStatus(job.getPath()):
            commits = Layout.commit_log(cp.getPath().toString())
            if not cp.isDirectory() or not fs.exists(jvm.org.apache.hadoop.fs.Path(commits)):
                continue
            newest = newest_batch(spark, commits)
            mtime = newest.modified_ms / 1000.0 if newest is not None else None
            out.append(
                {
                    "job": job.getPath().getName(),
                    "stream": cp.getPath().getName(),
                    "last_batch_id": newest.batch_id if newest is not None else None,
                    "last_batch_at": datetime.fromtimestamp(mtime, UTC) if mtime else None,
                    "age_seconds": round(now - mtime, 1) if mtime else None,
                }
            )
    return sorted(out, key=lambda s: (s["job"], s["stream"]))


def status(
    spark: Any, cfg: ProtolakeConfig, *, check_kafka: bool = True, show_progress: bool = True
) -> dict[str, Any]:
    """Every section (module docstring), as one JSON-able dict."""
    layout = Layout(cfg.lakehouse_path)
    with progress(show_progress) as steps:
        with steps.step("reading bronze"):
            bronze = bronze_progress(spark, layout)
        kafka: dict[tuple[str, int], tuple[int, int]] = {}
        if check_kafka:
            with steps.step("asking Kafka for end offsets"):
                kafka = kafka_offsets(cfg, sorted({t for t, _ in bronze}))
        with steps.step("counting silver and quarantine"):
            processed = processed_counts(spark, layout)
            quarantine = quarantine_summary(spark, layout)
        with steps.step("reading quality results"):
            quality = quality_summary(spark, layout)
        streams = stream_ages(spark, layout)
    partitions = []
    for key in sorted(set(bronze) | set(kafka) | set(processed)):
        b = bronze.get(key, {"records": 0, "latest": -1})
        low_high = kafka.get(key)
        done = processed.get(key, 0)
        partitions.append(
            {
                "topic": key[0],
                "partition": key[1],
                "kafka_start_offset": low_high[0] if low_high else None,
                "kafka_end_offset": low_high[1] if low_high else None,
                "bronze_latest_offset": b["latest"] if b["latest"] >= 0 else None,
                "bronze_records": b["records"],
                "kafka_lag": max(0, low_high[1] - (b["latest"] + 1)) if low_high else None,
                "silver_processed": done,
                "silver_pending": b["records"] - done,
            }
        )
    return {
        "lakehouse": layout.root,
        "kafka_checked": check_kafka,
        "partitions": partitions,
        "totals": {
            "kafka_lag": sum(p["kafka_lag"] or 0 for p in partitions),
            "bronze_records": sum(p["bronze_records"] for p in partitions),
            "silver_pending": sum(p["silver_pending"] for p in partitions),
        },
        "quarantine": quarantine,
        "quality": quality,
        "streams": streams,
        "generated_at": datetime.now(UTC),
    }


def add_parser(subparsers: Any) -> None:
    """Register ``protolake status``."""
    p = subparsers.add_parser(
        "status",
        help="Kafka end offsets against the lakehouse, per partition",
        description="Kafka lag of bronze, silver progress, quarantine by reason, the last "
        "quality results and the age of each stream's last batch.",
    )
    p.add_argument("--no-kafka", action="store_true", help="do not ask Kafka for end offsets")
    p.set_defaults(func=run_from_args)


def run_from_args(args: argparse.Namespace) -> int:
    """``protolake status``."""
    cfg = loaded_config(args.config)
    spark = open_session(cfg, "protolake-status")
    data = status(spark, cfg, check_kafka=not args.no_kafka)
    emit(args.json, data, lambda console: render(console, data))
    return 0


def render(console: Any, data: dict[str, Any]) -> None:
    """The human view."""
    console.print(
        f"protolake status of {data['lakehouse']} at {data['generated_at']:%Y-%m-%d %H:%M:%S} UTC"
    )
    console.print(
        table(
            "partitions",
            [
                "topic",
                "part",
                "kafka end",
                "bronze latest",
                "lag",
                "bronze",
                "silver+quar.",
                "pending",
            ],
            [
                [
                    p["topic"],
                    p["partition"],
                    p["kafka_end_offset"],
                    p["bronze_latest_offset"],
                    p["kafka_lag"],
                    p["bronze_records"],
                    p["silver_processed"],
                    p["silver_pending"],
                ]
                for p in data["partitions"]
            ],
        )
    )
    q = data["quarantine"]
    console.print(
        table(
            f"quarantine ({q['active']} records; {q['replayed']} replayed into silver)",
            ["reason", "records"],
            [[k, v] for k, v in q["by_reason"].items()],
        )
    )
    qt = data["quality"]["tables"]
    if qt:
        console.print(
            table(
                f"quality (last validation {data['quality']['last_validated_at']})",
                ["table", "batches", "checked", "passed", "quarantined", "failed batches"],
                [
                    [
                        t["table"],
                        t["batches"],
                        t["checked"],
                        t["passed"],
                        t["quarantined"],
                        t["failed_batches"],
                    ]
                    for t in qt
                ],
            )
        )
    console.print(
        table(
            "streams",
            ["job", "stream", "last batch", "last batch at", "age (s)"],
            [
                [s["job"], s["stream"], s["last_batch_id"], s["last_batch_at"], s["age_seconds"]]
                for s in data["streams"]
            ],
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    from pipelines.cli import main as cli_main

    return cli_main(["status", *(argv or [])])
