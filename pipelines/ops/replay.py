"""``protolake replay``: re-decode quarantined records once their cause is fixed.

    protolake replay --config F [--reason CODE ...] [--topic T ...] [--schema-id N ...]
                     [--since ISO] [--until ISO] [--dry-run] [--json]

Selection: quarantine rows not yet replayed (``replay_outcome`` null or a failure reason),
whose current reason (the last replay's failure reason, else ``reason_code``), topic, schema id
and Kafka timestamp (``--since`` inclusive, ``--until`` exclusive) match. The quarantine table is
read at one pinned Delta version, so the selection does not move while the command runs.

Decoding and writing go through silver's own batch function (``SilverBatch``: framing, schema
resolution, decoding, schema evolution, quality checks, idempotent silver writes), fed with
the quarantined raw bytes: a replayed record lands exactly as silver would have written it.
Its quarantine output is not appended; instead each selected quarantine row is updated:

- ``replay_outcome = "replayed"``, ``replayed_at = now`` when the record is now in a silver
  table (checked by reading silver, not assumed);
- ``replay_outcome = <new reason code>``, ``replayed_at = now`` when it still fails (the row
  stays quarantined with its new reason; ``reason_code`` keeps the original reason);
- unchanged otherwise.

Raw bytes are never deleted. Exactly once, whatever happens between two runs: before writing,
the selected records that a silver table already holds (by ``(topic, partition, offset)``, the
key of the invariant) are set aside: an earlier replay wrote them and died before marking them.
They are marked ``replayed`` with the others and never written again, even when the selection
has changed since (a record quarantined meanwhile, another filter). The rest is written with
``txnAppId = "replay-<hash of their keys and of the silver versions checked>"``, so two runs
that checked the same silver state and write the same records commit them once; any commit
since (an interrupted replay's included) gives a new id, so Delta never skips a write whose
records are not in silver yet. A second replay of the same filter selects only records that
still fail. A registry outage fails the command (``RegistryUnavailable``) and changes nothing.
Exit code 0 (records that still fail are an outcome, not an error: the maintenance DAG runs
this daily); with ``--strict``, 1 when some selected records still fail.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lakehouse.delta import is_delta_table, retry_conflicts, silver_versions, table_version
from lakehouse.layout import Layout
from lakehouse.lease import take_writer_lease
from pipelines.ops.common import effective_reason, emit, parse_time, progress, table
from pipelines.quarantine import RECORD_KEY, REPLAYED, still_quarantined
from pipelines.settings import ProtolakeConfig, load_config
from pipelines.settings.clients import open_session

log = logging.getLogger("pipelines.ops.replay")


@dataclass(frozen=True)
class ReplayFilter:
    """Which quarantined records to replay (empty tuple: any)."""

    reasons: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    schema_ids: tuple[int, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "reasons": list(self.reasons),
            "topics": list(self.topics),
            "schema_ids": list(self.schema_ids),
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
        }


@dataclass
class ReplayReport:
    """What a replay selected and did."""

    selected: int = 0
    replayed: int = 0
    still_failing: dict[str, int] = field(default_factory=dict)  # new reason -> records
    unchanged: int = 0  # neither in silver nor failing (left for a later replay)
    already_in_silver: int = 0  # in silver before this run (an interrupted replay): marked only
    selected_by_reason: dict[str, int] = field(default_factory=dict)
    silver_tables: dict[str, int] = field(default_factory=dict)  # table -> rows written
    quarantine_version: int | None = None
    app_id: str = ""
    dry_run: bool = False
    seconds: float = 0.0
    filter: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "selected": self.selected,
            "selected_by_reason": dict(sorted(self.selected_by_reason.items())),
            "replayed": self.replayed,
            "still_failing": dict(sorted(self.still_failing.items())),
            "unchanged": self.unchanged,
            "already_in_silver": self.already_in_silver,
            "silver_tables": dict(sorted(self.silver_tables.items())),
            "quarantine_version": self.quarantine_version,
            "app_id": self.app_id,
            "dry_run": self.dry_run,
            "seconds": self.seconds,
            "filter": self.filter,
        }


def select_pending(spark: Any, lakehouse_path: str, flt: ReplayFilter, version: int) -> Any:
    """Quarantine rows (at ``version``) not yet replayed that match ``flt``, one per record."""
    from pyspark.sql import functions as F  # noqa: N812

    q = (
        spark.read.format("delta")
        .option("versionAsOf", version)
        .load(Layout(lakehouse_path).quarantine)
    )
    q = q.filter(still_quarantined())
    q = q.withColumn("_current_reason", effective_reason())
    if flt.reasons:
        q = q.filter(F.col("_current_reason").isin(list(flt.reasons)))
    if flt.topics:
        q = q.filter(F.col("_kafka_topic").isin(list(flt.topics)))
    if flt.schema_ids:
        q = q.filter(F.col("_schema_id").isin(list(flt.schema_ids)))
    if flt.since is not None:
        q = q.filter(F.col("_kafka_timestamp") >= F.lit(flt.since).cast("timestamp"))
    if flt.until is not None:
        q = q.filter(F.col("_kafka_timestamp") < F.lit(flt.until).cast("timestamp"))
    return q.dropDuplicates(list(RECORD_KEY))


def as_bronze(pending: Any) -> Any:
    """Quarantine rows shaped like bronze rows (what silver's batch function reads).

    ``_quarantined_at`` stands in for bronze's ``_ingested_at`` (quarantine does not keep it), so
    the quality rules' reference time is the latest ``_quarantined_at`` of the selection: a
    Kafka timestamp is judged against when the lakehouse had the records, the same on every
    run of the selection, not against the day of the replay.
    """
    from pyspark.sql import functions as F  # noqa: N812

    return pending.select(
        "key",
        "value",
        F.col("_kafka_topic").alias("topic"),
        F.col("_kafka_partition").alias("partition"),
        F.col("_kafka_offset").alias("offset"),
        F.col("_kafka_timestamp").alias("timestamp"),
        "headers",
        F.col("_quarantined_at").alias("_ingested_at"),
    )


def selection_id(
    count: int, key_hash_sum: int, silver_versions: Sequence[tuple[str, int]] = ()
) -> tuple[str, int]:
    """The app id and batch id (txnVersion) of the records a replay writes.

    Equal records checked against equal silver versions give equal ids (module docstring).
    """
    state = ",".join(f"{path}@{version}" for path, version in sorted(silver_versions))
    digest = hashlib.sha256(f"{count}:{key_hash_sum}:{state}".encode()).hexdigest()
    # a large batch id keeps replays apart from streaming batch ids in quality results
    return f"replay-{digest[:32]}", int(digest[32:45], 16)


def replay(
    spark: Any,
    cfg: ProtolakeConfig,
    flt: ReplayFilter,
    *,
    dry_run: bool = False,
    resolver: Any = None,
    show_progress: bool = True,
) -> ReplayReport:
    """Replay the selected quarantined records (module docstring); return the report.

    Raises:
        codec.RegistryUnavailable (inside a Py4J/Spark error): the registry did not answer.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F  # noqa: N812

    t0 = time.monotonic()
    root = cfg.lakehouse_path
    report = ReplayReport(dry_run=dry_run, filter=flt.describe())
    qpath = Layout(root).quarantine
    if not is_delta_table(qpath, spark):
        log.warning("replay: no quarantine table at %s", qpath)
        return report
    version = table_version(qpath, spark)
    report.quarantine_version = version
    with progress(show_progress) as steps:
        with steps.step("selecting quarantined records"):
            pending = select_pending(spark, root, flt, version).persist(
                StorageLevel.MEMORY_AND_DISK
            )
        to_write = None
        try:
            for row in pending.groupBy("_current_reason").count().collect():
                report.selected_by_reason[row["_current_reason"]] = int(row["count"])
            report.selected = sum(report.selected_by_reason.values())
            if report.selected == 0 or dry_run:
                return report
            with steps.step("checking silver for records already written"):
                versions = sorted(silver_versions(Layout(root), spark).items())
                done = keys_in_silver(spark, versions, pending)
                to_write = pending.join(done, list(RECORD_KEY), "left_anti").persist(
                    StorageLevel.MEMORY_AND_DISK
                )
                stats = to_write.agg(
                    F.count(F.lit(1)).alias("n"),
                    F.sum(F.xxhash64(*RECORD_KEY).cast("decimal(38,0)")).alias("h"),
                ).first()
            report.already_in_silver = report.selected - int(stats["n"])
            if int(stats["n"]):
                app_id, batch_id = selection_id(int(stats["n"]), int(stats["h"] or 0), versions)
                report.app_id = app_id
                failures = _run_silver(
                    spark, cfg, to_write, app_id, batch_id, resolver, steps, report
                )
            else:
                failures = _no_failures(spark)
            with steps.step("marking quarantine rows"):
                _mark(spark, root, pending, failures, report)
            failures.unpersist()
        finally:
            if to_write is not None:
                to_write.unpersist()
            pending.unpersist()
            report.seconds = round(time.monotonic() - t0, 3)
    log.info("replay: %s", report.to_dict())
    return report


def _run_silver(
    spark: Any,
    cfg: ProtolakeConfig,
    pending: Any,
    app_id: str,
    batch_id: int,
    resolver: Any,
    steps: Any,
    report: ReplayReport,
) -> Any:
    """Feed the selection to silver's batch function; return the still-failing keys (persisted)."""
    from pyspark import StorageLevel

    from pipelines.settings.clients import catalog_databases, open_resolver
    from pipelines.silver.batch import SilverBatch
    from pipelines.silver.job import make_checker

    checker = make_checker(spark, cfg)
    captured: list[Any] = []

    def keep_failures(quarantine: Any, _batch_id: int) -> None:
        # materialized now, while silver's persisted frames are still there
        q = quarantine.select(*RECORD_KEY, "reason_code").persist(StorageLevel.MEMORY_AND_DISK)
        q.count()
        captured.append(q)

    batch = SilverBatch(
        spark,
        cfg.lakehouse_path,
        app_id,
        resolver or open_resolver(cfg),
        max_depth=cfg.silver.max_recursion_depth,
        allow_unknown_fields=cfg.silver.keep_unknown_fields,
        native=cfg.silver.native_decoder,
        cache_bronze=cfg.silver.cache_bronze,
        databases=catalog_databases(cfg),
        checker=checker,
        quarantine_writer=keep_failures,
    )
    with steps.step(f"re-decoding {report.selected - report.already_in_silver} records"):
        batch(as_bronze(pending), batch_id)
    if batch.history:
        report.silver_tables = dict(batch.history[-1].silver)
    if not captured:  # silver returned early (nothing to do)
        return _no_failures(spark)
    return captured[0]


def _no_failures(spark: Any) -> Any:
    return spark.createDataFrame(
        [], "_kafka_topic string, _kafka_partition int, _kafka_offset long, reason_code string"
    ).persist()


def keys_in_silver(spark: Any, versions: Sequence[tuple[str, int]], rows: Any) -> Any:
    """The record keys of ``rows`` that a silver table holds (each read at its given version)."""
    from pyspark.sql import functions as F  # noqa: N812

    keys = rows.select(*RECORD_KEY)
    topics = [r[0] for r in keys.select("_kafka_topic").distinct().collect()]
    in_silver = None
    for path, version in versions:
        s = (
            spark.read.format("delta")
            .option("versionAsOf", version)
            .load(path)
            .select(*RECORD_KEY)
            .filter(F.col("_kafka_topic").isin(topics))
        )
        in_silver = s if in_silver is None else in_silver.unionByName(s)
    if in_silver is None:
        return keys.limit(0)
    return keys.join(in_silver.distinct(), list(RECORD_KEY), "left_semi")


def _mark(spark: Any, root: str, pending: Any, failures: Any, report: ReplayReport) -> None:
    """Set replayed_at/replay_outcome on the selected rows from what silver now holds."""
    from pyspark.sql import functions as F  # noqa: N812

    keys = pending.select(*RECORD_KEY)
    versions = sorted(silver_versions(Layout(root), spark).items())
    found = keys_in_silver(spark, versions, keys).withColumn("_in_silver", F.lit(True))
    fails = failures.groupBy(*RECORD_KEY).agg(F.first("reason_code").alias("_new_reason"))
    outcomes = (
        keys.join(found, list(RECORD_KEY), "left")
        .join(fails, list(RECORD_KEY), "left")
        .select(
            *RECORD_KEY,
            F.when(F.col("_in_silver"), F.lit(REPLAYED))
            .otherwise(F.col("_new_reason"))
            .alias("_outcome"),
        )
    )
    counts = outcomes.groupBy("_outcome").count().collect()
    for row in counts:
        if row["_outcome"] is None:
            report.unchanged = int(row["count"])
        elif row["_outcome"] == REPLAYED:
            report.replayed = int(row["count"])
        else:
            report.still_failing[row["_outcome"]] = int(row["count"])
    source = outcomes.filter(F.col("_outcome").isNotNull()).withColumn(
        "_replayed_at", F.lit(datetime.now(UTC)).cast("timestamp")
    )
    merge_outcomes(spark, Layout(root).quarantine, source)


def merge_outcomes(spark: Any, qpath: str, source: Any, attempts: int = 5) -> None:
    """MERGE (key, _outcome, _replayed_at) into the quarantine rows not yet replayed.

    Retried on a concurrent commit (the silver stream appends to the same table); the MERGE
    sets values, so retrying is idempotent.
    """
    from delta.tables import DeltaTable

    cond = " AND ".join(f"t.{c} = s.{c}" for c in RECORD_KEY)
    cond += f" AND (t.replay_outcome IS NULL OR t.replay_outcome <> '{REPLAYED}')"

    def commit() -> None:
        (
            DeltaTable.forPath(spark, qpath)
            .alias("t")
            .merge(source.alias("s"), cond)
            .whenMatchedUpdate(
                set={"replayed_at": "s._replayed_at", "replay_outcome": "s._outcome"}
            )
            .execute()
        )

    retry_conflicts(commit, f"the replay outcomes on {qpath}", attempts, logger=log)


# --- command line ---------------------------------------------------------------------------


def add_parser(subparsers: Any) -> None:
    """Register ``protolake replay``."""
    p = subparsers.add_parser(
        "replay",
        help="re-decode quarantined records",
        description="Re-decode quarantined records whose cause was fixed; those that now "
        "decode are written to silver (idempotently) and marked replayed in quarantine.",
    )
    p.add_argument("--reason", action="append", default=[], metavar="CODE", help="reason code")
    p.add_argument("--topic", action="append", default=[], metavar="T", help="Kafka topic")
    p.add_argument("--schema-id", action="append", type=int, default=[], metavar="N")
    p.add_argument("--since", default=None, metavar="ISO", help="Kafka timestamp >= this")
    p.add_argument("--until", default=None, metavar="ISO", help="Kafka timestamp < this")
    p.add_argument("--dry-run", action="store_true", help="only count what would be replayed")
    p.add_argument("--strict", action="store_true", help="exit code 1 when some records still fail")
    p.set_defaults(func=run_from_args)


def filter_from_args(args: argparse.Namespace) -> ReplayFilter:
    """The filter of the command line (``ValueError`` for a bad time)."""
    return ReplayFilter(
        reasons=tuple(r.upper() for r in args.reason),
        topics=tuple(args.topic),
        schema_ids=tuple(args.schema_id),
        since=parse_time(args.since) if args.since else None,
        until=parse_time(args.until) if args.until else None,
    )


def run_from_args(args: argparse.Namespace) -> int:
    """``protolake replay``."""
    cfg = load_config(args.config)
    try:
        flt = filter_from_args(args)
    except ValueError as exc:
        print(f"protolake replay: {exc}", file=sys.stderr)
        return 2
    spark = open_session(cfg, "protolake-replay")
    # replay writes silver and quarantine: on an object store, not beside a running silver
    lease = None if args.dry_run else take_writer_lease(spark, cfg.lakehouse_path, "silver")
    try:
        report = replay(spark, cfg, flt, dry_run=args.dry_run, show_progress=True)
    finally:
        if lease is not None:
            lease.release()
    emit(args.json, report.to_dict(), lambda console: render(console, report))
    return 1 if args.strict and report.still_failing and not report.dry_run else 0


def render(console: Any, report: ReplayReport) -> None:
    """The human view of a report."""
    verb = "would replay" if report.dry_run else "selected"
    console.print(
        f"replay: {verb} {report.selected} quarantined records "
        f"(quarantine version {report.quarantine_version}, {report.seconds} s)"
    )
    if report.selected_by_reason:
        console.print(
            table(
                "selected, by current reason",
                ["reason", "records"],
                [[k, v] for k, v in sorted(report.selected_by_reason.items())],
            )
        )
    if report.dry_run or not report.selected:
        return
    rows: list[list[Any]] = [["replayed (now in silver)", report.replayed]]
    if report.already_in_silver:
        rows.append(["  of which already in silver (not written again)", report.already_in_silver])
    rows += [[f"still failing: {k}", v] for k, v in sorted(report.still_failing.items())]
    if report.unchanged:
        rows.append(["unchanged (retry later)", report.unchanged])
    console.print(table("outcome", ["outcome", "records"], rows))
    if report.silver_tables:
        console.print(
            table(
                "silver rows written",
                ["table", "rows"],
                [[k, v] for k, v in sorted(report.silver_tables.items())],
            )
        )


def main(argv: Sequence[str] | None = None) -> int:
    from pipelines.cli import main as cli_main

    return cli_main(["replay", *(argv or [])])
