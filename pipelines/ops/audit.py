"""``protolake audit``: check the lakehouse against itself and against Kafka.

    protolake audit --config F [--sample N] [--no-kafka] [--json]

Checks, each naming the offending records (topic, partition, offset, where found):

1. the invariant (:func:`pipelines.quarantine.check_invariant`): every bronze record is in
   exactly one silver table or (not replayed) in quarantine; nothing twice, nothing missing,
   nothing in silver/quarantine that bronze lacks, no record twice in bronze. A bronze record
   in neither that silver has not taken yet (its file is in silver's backlog, read from its
   checkpoints: ``pipelines.silver_backlog``) is pending, not missing: the audit holds while
   the streams run, as the Kafka records bronze has yet to read are not losses either;
2. gaps: per topic partition, offsets missing between bronze's consecutive offsets (and,
   with ``kafka.starting_offsets = "earliest"``, between Kafka's first offset and bronze's
   first). A gap is normal when Kafka no longer serves those offsets: compacted away, deleted
   by retention, transaction markers, aborted transactions. So each gap is read back with a
   confluent-kafka consumer (``isolation.level=read_committed``); only offsets Kafka still
   returns are errors ("missing from bronze"). A gap that could not be read (timeout) is
   reported as unverified and fails the audit too.

Exit code 0 when everything holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakehouse.layout import Layout
from lakehouse.tables import list_delta_tables
from pipelines.ops.common import emit, loaded_config, progress, table
from pipelines.quarantine import InvariantReport, check_invariant
from pipelines.settings import ProtolakeConfig
from pipelines.settings.clients import client_logging, kafka_client_conf, open_session

log = logging.getLogger("pipelines.ops.audit")

# Reading through a stretch of present records is cheaper than a new fetch up to this many.
_SEEK_DISTANCE = 5000


@dataclass(frozen=True)
class Gap:
    """Offsets ``start..end`` (inclusive) of one partition that bronze does not have."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start + 1


@dataclass
class GapCheck:
    """Outcome of reading gaps back from Kafka."""

    gaps: int = 0
    gap_offsets: int = 0
    readable: dict[tuple[str, int], list[int]] = field(default_factory=dict)  # missing records
    unverified: list[Gap] = field(default_factory=list)

    @property
    def missing(self) -> int:
        return sum(len(v) for v in self.readable.values())


@dataclass
class AuditReport:
    invariant: InvariantReport
    gaps: GapCheck
    kafka_checked: bool
    seconds: float = 0.0

    @property
    def holds(self) -> bool:
        return self.invariant.holds and not self.gaps.missing and not self.gaps.unverified

    def to_dict(self, sample: int = 20) -> dict[str, Any]:
        inv = self.invariant
        missing_from_bronze = [
            {"topic": t, "partition": p, "offset": o, "found_in": ["kafka"]}
            for (t, p), offs in sorted(self.gaps.readable.items())
            for o in offs[:sample]
        ]
        return {
            "holds": self.holds,
            "invariant": {
                "holds": inv.holds,
                "bronze_records": inv.bronze_records,
                "silver_records": inv.silver_records,
                "quarantined_records": inv.quarantined_records,
                "missing": inv.missing,
                "in_both": inv.in_both,
                "duplicated": inv.duplicated,
                "orphans": inv.orphans,
                "bronze_duplicates": inv.bronze_duplicates,
                "pending": inv.pending,
                "offenders": inv.offenders,
            },
            "kafka": {
                "checked": self.kafka_checked,
                "gaps": self.gaps.gaps,
                "gap_offsets": self.gaps.gap_offsets,
                "missing_from_bronze": self.gaps.missing,
                "offenders": missing_from_bronze,
                "unverified_count": len(self.gaps.unverified),
                "unverified": [g.__dict__ for g in self.gaps.unverified[:sample]],
            },
            "seconds": self.seconds,
        }


def find_gaps(spark: Any, bronze_paths: Sequence[str]) -> list[Gap]:
    """Offset ranges missing between consecutive bronze offsets, per topic partition."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812

    gaps: list[Gap] = []
    w = Window.partitionBy("topic", "partition").orderBy("offset")
    for path in bronze_paths:
        b = spark.read.format("delta").load(path).select("topic", "partition", "offset").distinct()
        rows = (
            b.withColumn("_prev", F.lag("offset").over(w))
            .filter(F.col("offset") - F.col("_prev") > 1)
            .select("topic", "partition", "_prev", "offset")
            .collect()
        )
        gaps.extend(Gap(r[0], int(r[1]), int(r[2]) + 1, int(r[3]) - 1) for r in rows)
    return sorted(gaps, key=lambda g: (g.topic, g.partition, g.start))


def leading_gaps(spark: Any, bronze_paths: Sequence[str], conf: dict[str, Any]) -> list[Gap]:
    """Offsets between Kafka's first offset (low watermark) and bronze's first, per partition."""
    from confluent_kafka import Consumer, TopicPartition
    from pyspark.sql import functions as F  # noqa: N812

    firsts: dict[tuple[str, int], int] = {}
    for path in bronze_paths:
        for r in (
            spark.read.format("delta")
            .load(path)
            .groupBy("topic", "partition")
            .agg(F.min("offset"))
            .collect()
        ):
            key = (r[0], int(r[1]))
            firsts[key] = min(firsts.get(key, int(r[2])), int(r[2]))
    if not firsts:
        return []
    consumer = Consumer({**conf, **client_logging(), "group.id": f"protolake-audit-{uuid.uuid4()}"})
    try:
        out = []
        for (t, p), first in sorted(firsts.items()):
            low, _ = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)
            if low < first:
                out.append(Gap(t, p, low, first - 1))
        return out
    finally:
        consumer.close()


def check_gaps(
    gaps: Sequence[Gap],
    conf: dict[str, Any],
    *,
    poll_timeout: float = 10.0,
    track: Any = None,
) -> GapCheck:
    """Read each gap back from Kafka (read_committed): offsets it returns are missing records."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    result = GapCheck(gaps=len(gaps), gap_offsets=sum(g.size for g in gaps))
    if not gaps:
        return result
    by_partition: dict[tuple[str, int], list[Gap]] = defaultdict(list)
    for g in gaps:
        by_partition[(g.topic, g.partition)].append(g)
    consumer = Consumer(
        {
            **conf,
            **client_logging(),
            "group.id": f"protolake-audit-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    parts = sorted(by_partition)
    try:
        for key in track(parts, "reading gaps back from Kafka") if track else parts:
            pgaps = sorted(by_partition[key], key=lambda g: g.start)
            found = _read_partition_gaps(
                consumer, key, pgaps, poll_timeout, result, KafkaError, TopicPartition
            )
            if found:
                result.readable[key] = found
    finally:
        consumer.close()
    return result


def _read_partition_gaps(
    consumer: Any,
    key: tuple[str, int],
    gaps: list[Gap],
    poll_timeout: float,
    result: GapCheck,
    kafka_error: Any,
    topic_partition: Any,
) -> list[int]:
    topic, partition = key
    found: list[int] = []
    i = 0
    seek = True
    while i < len(gaps):
        gap = gaps[i]
        if seek:
            consumer.assign([topic_partition(topic, partition, gap.start)])
            seek = False
        deadline = time.monotonic() + poll_timeout
        msg = None
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                break
        if msg is None:
            result.unverified.extend(gaps[i:])
            return found
        if msg.error():
            if msg.error().code() == kafka_error._PARTITION_EOF:
                return found  # nothing readable after here: the remaining gaps are empty
            raise RuntimeError(f"audit: reading {topic}[{partition}]: {msg.error()}")
        off = msg.offset()
        # gaps entirely before this offset are not readable: skip them
        while i < len(gaps) and gaps[i].end < off:
            i += 1
        if i == len(gaps):
            return found
        if gaps[i].start <= off <= gaps[i].end:
            found.append(off)
        elif gaps[i].start - off > _SEEK_DISTANCE:
            seek = True  # far from the next gap: fetch there instead of reading through
    return found


def audit(
    spark: Any,
    cfg: ProtolakeConfig,
    *,
    sample: int = 20,
    check_kafka: bool = True,
    show_progress: bool = True,
) -> AuditReport:
    """Run every check (module docstring)."""
    t0 = time.monotonic()
    layout = Layout(cfg.lakehouse_path)
    bronze_paths = list_delta_tables(layout.bronze, spark)
    with progress(show_progress) as steps:
        with steps.step("checking bronze = silver + quarantine"):
            inv = check_invariant(spark, layout.root, sample=sample, while_running=True)
        gaps = GapCheck()
        if check_kafka and bronze_paths:
            conf = kafka_client_conf(cfg)
            with steps.step("finding offset gaps in bronze"):
                found = find_gaps(spark, bronze_paths)
                if cfg.kafka.starting_offsets == "earliest":
                    found = sorted(
                        found + leading_gaps(spark, bronze_paths, conf),
                        key=lambda g: (g.topic, g.partition, g.start),
                    )
            gaps = check_gaps(found, conf, track=steps.track)
    report = AuditReport(inv, gaps, check_kafka, round(time.monotonic() - t0, 3))
    log.info("audit: %s", "holds" if report.holds else "FAILED")
    return report


def add_parser(subparsers: Any) -> None:
    """Register ``protolake audit``."""
    p = subparsers.add_parser(
        "audit",
        help="check bronze = silver + quarantine, record by record",
        description="Check that every bronze record is in exactly one silver table or in "
        "quarantine, that nothing is duplicated, and that bronze has every offset Kafka "
        "still serves. Exit code 1 when a check fails.",
    )
    p.add_argument(
        "--sample", type=_at_least_zero, default=20, help="offending records named per kind"
    )
    p.add_argument("--no-kafka", action="store_true", help="skip the gap check against Kafka")
    p.set_defaults(func=run_from_args)


def _at_least_zero(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def run_from_args(args: argparse.Namespace) -> int:
    """``protolake audit``."""
    cfg = loaded_config(args.config)
    spark = open_session(cfg, "protolake-audit")
    report = audit(spark, cfg, sample=args.sample, check_kafka=not args.no_kafka)
    data = report.to_dict(args.sample)
    emit(args.json, data, lambda console: render(console, data))
    return 0 if report.holds else 1


def _offender_rows(offenders: dict[str, list[dict[str, Any]]]) -> Iterable[list[Any]]:
    for kind, recs in sorted(offenders.items()):
        for r in recs:
            yield [kind, r["topic"], r["partition"], r["offset"], ", ".join(r["found_in"])]


def render(console: Any, data: dict[str, Any]) -> None:
    """The human view of an audit."""
    inv, k = data["invariant"], data["kafka"]
    console.print(
        f"audit {'PASSED' if data['holds'] else 'FAILED'} ({data['seconds']} s): "
        f"bronze {inv['bronze_records']} = silver {inv['silver_records']} + quarantine "
        f"{inv['quarantined_records']}"
    )
    console.print(
        table(
            "checks",
            ["check", "offending records"],
            [
                ["in neither silver nor quarantine", inv["missing"]],
                ["in silver and quarantine", inv["in_both"]],
                ["more than once in silver/quarantine", inv["duplicated"]],
                ["in silver/quarantine, not in bronze", inv["orphans"]],
                ["more than once in bronze", inv["bronze_duplicates"]],
                [
                    "in Kafka, missing from bronze",
                    k["missing_from_bronze"] if k["checked"] else None,
                ],
                [
                    "gaps not verifiable against Kafka",
                    k["unverified_count"] if k["checked"] else None,
                ],
            ],
        )
    )
    if inv["pending"]:
        console.print(
            f"pending: {inv['pending']} bronze records silver has not taken yet (its backlog, "
            "not a fault)"
        )
    if k["checked"]:
        console.print(
            f"bronze offset gaps: {k['gaps']} ({k['gap_offsets']} offsets); the rest are "
            "compacted, expired, transaction markers or aborted records"
        )
    rows = list(_offender_rows(inv["offenders"]))
    rows += [
        ["missing_from_bronze", r["topic"], r["partition"], r["offset"], "kafka"]
        for r in k["offenders"]
    ]
    if rows:
        console.print(
            table("offending records", ["kind", "topic", "partition", "offset", "found in"], rows)
        )


def main(argv: Sequence[str] | None = None) -> int:
    from pipelines.cli import main as cli_main

    return cli_main(["audit", *(argv or [])])
