"""``protolake replay``: re-decode quarantined records once their cause is fixed.

    protolake replay --config F [--reason CODE ...] [--topic T ...] [--schema-id N ...]
                     [--since ISO] [--until ISO] [--dry-run] [--strict] [--json]

The records are selected, checked against silver, written under a write id of their own and
marked in quarantine as ``pipelines.ops.replay_state`` describes (quarantine rows not yet
replayed that match the filter, at one pinned Delta version; marked ``replayed`` or with their
new reason, never deleted; exactly once, whatever happens between two runs).

Decoding and writing go through silver's own batch function (``SilverBatch``: framing, schema
resolution, decoding, schema evolution, quality checks, idempotent silver writes), fed with
the quarantined raw bytes: a replayed record lands exactly as silver would have written it.
Its quarantine output is not appended; the selected quarantine rows are marked instead. A
second replay of the same filter selects only records that still fail. One replay writes at a
time: a second is refused (a lock on a local lakehouse, silver's writer lease on an object
store), or both would write the records silver does not hold yet. A registry outage
fails the command (``RegistryUnavailable``) and changes nothing. Exit code 0 (records that
still fail are an outcome, not an error: the maintenance DAG runs this daily); with
``--strict``, 1 when some selected records still fail.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from lakehouse.bronze_columns import INGESTED_AT
from lakehouse.checkpoint_guard import guard_checkpoint, release_checkpoint
from lakehouse.layout import Layout, local_path
from lakehouse.lease import holds_no_lease, raise_if_lost
from lakehouse.materialized import materialize, release
from lakehouse.tables import is_delta_table, table_version
from pipelines.ops.common import emit, loaded_config, parse_time, progress, table
from pipelines.ops.replay_state import (
    ReplayFilter,
    mark_outcomes,
    no_failures,
    records_to_write,
    select_pending,
)
from pipelines.quarantine import RECORD_KEY, REPLAYED
from pipelines.settings import ProtolakeConfig
from pipelines.settings.clients import open_session, writer_lease

log = logging.getLogger("pipelines.ops.replay")


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
        F.col("_quarantined_at").alias(INGESTED_AT),
    )


def replay(
    spark: Any,
    cfg: ProtolakeConfig,
    flt: ReplayFilter,
    *,
    dry_run: bool = False,
    resolver: Any = None,
    show_progress: bool = True,
    still_writer: Callable[[], None] = holds_no_lease,
) -> ReplayReport:
    """Replay the selected quarantined records (module docstring); return the report.
    ``still_writer`` is called before each write (silver's, then the quarantine's marks): it
    raises when this driver lost the writer lease it replays under.

    Raises:
        codec.RegistryUnavailable (inside a Py4J/Spark error): the registry did not answer.
        lakehouse.lease.WriterLeaseError: from ``still_writer``.
    """
    from pyspark import StorageLevel

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
        try:
            _count_selected(pending, report)
            if report.selected and not dry_run:
                _write_and_mark(spark, cfg, pending, resolver, steps, report, still_writer)
        finally:
            pending.unpersist()
            report.seconds = round(time.monotonic() - t0, 3)
    if report.selected and not dry_run:
        log.info("replay: %s", report.to_dict())
    return report


def _count_selected(pending: Any, report: ReplayReport) -> None:
    for row in pending.groupBy("_current_reason").count().collect():
        report.selected_by_reason[row["_current_reason"]] = int(row["count"])
    report.selected = sum(report.selected_by_reason.values())


def _write_and_mark(
    spark: Any,
    cfg: ProtolakeConfig,
    pending: Any,
    resolver: Any,
    steps: Any,
    report: ReplayReport,
    still_writer: Callable[[], None],
) -> None:
    """Write the selected records silver does not hold yet, then mark every selected row."""
    with steps.step("checking silver for records already written"):
        to_write = records_to_write(spark, cfg.lakehouse_path, pending)
    try:
        report.already_in_silver = report.selected - to_write.count
        if to_write.count:
            report.app_id = to_write.app_id
            still_writer()
            failures = _run_silver(
                spark,
                cfg,
                to_write.rows,
                to_write.app_id,
                to_write.batch_id,
                resolver,
                steps,
                report,
            )
        else:
            failures = no_failures(spark)
        still_writer()
        with steps.step("marking quarantine rows"):
            outcomes = mark_outcomes(spark, cfg.lakehouse_path, pending, failures)
        release(failures)
    finally:
        to_write.rows.unpersist()
    for outcome, count in outcomes.items():
        if outcome is None:
            report.unchanged = count
        elif outcome == REPLAYED:
            report.replayed = count
        else:
            report.still_failing[outcome] = count


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
    """Feed the selection to silver's batch function; return the still-failing keys (kept,
    ``lakehouse.materialized``)."""
    from pipelines.settings.clients import catalog_databases, open_resolver
    from pipelines.silver.batch import SilverBatch
    from pipelines.silver.job import make_checker

    checker = make_checker(spark, cfg)
    captured: list[Any] = []

    def keep_failures(quarantine: Any, _batch_id: int) -> None:
        # computed now: silver frees the frames its quarantine reads when the batch ends
        captured.append(materialize(quarantine.select(*RECORD_KEY, "reason_code")))

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
        return no_failures(spark)
    return captured[0]


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


#: what a refused replay says of the one running
ANOTHER_REPLAY = (
    "replays already; wait for it to end (two replays at once would both write the records "
    "silver does not hold yet)"
)


def run_from_args(args: argparse.Namespace) -> int:
    """``protolake replay``."""
    cfg = loaded_config(args.config, missing_ok=True)
    try:
        flt = filter_from_args(args)
    except ValueError as exc:
        print(f"protolake replay: {exc}", file=sys.stderr)
        return 2
    # two replays at once would both write the records silver does not hold yet: on a local
    # lakehouse one at a time (a lock held until the replay ends), on an object store under
    # silver's writer lease (not beside a running silver either)
    running = Layout(cfg.lakehouse_path).writer_lease("replay")
    folder = local_path(cfg.lakehouse_path)  # a missing one is not made: nothing to replay
    there = folder is None or folder.is_dir()
    locked = not args.dry_run and there and guard_checkpoint(running, ANOTHER_REPLAY)
    try:
        spark = open_session(cfg, "protolake-replay")
        lease = None if args.dry_run else writer_lease(spark, cfg, "silver")
        try:
            report = replay(
                spark,
                cfg,
                flt,
                dry_run=args.dry_run,
                show_progress=True,
                still_writer=partial(raise_if_lost, [lease]),
            )
        finally:
            if lease is not None:
                lease.release()
    finally:
        if locked:
            release_checkpoint(running)
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
