"""``protolake maintain``: OPTIMIZE (compaction) and VACUUM of the lakehouse's Delta tables.

    protolake maintain --config F [--table-group bronze|silver|quarantine|quality|all]
                       [--retention-hours 168] [--dry-run] [--force-retention]
                       [--no-optimize] [--no-vacuum] [--json]

This command line is stable: the maintenance DAG (dags/protolake_maintenance.py) calls it.

- Groups: every Delta table directly under ``bronze/``, ``silver/``, ``quarantine/``,
  ``quality/`` (``all``: the four). For ``quality`` and ``all``, quality results older than
  ``[quality] results_retention_days`` are deleted first (not in a dry run; 0 keeps all).
- OPTIMIZE compacts small files (streaming micro-batches write many). Its commits are
  ``dataChange = false``, so the silver stream reading bronze does not see them as new data.
- VACUUM deletes files no longer referenced for longer than ``--retention-hours`` (default
  168 = Delta's own safety minimum, which keeps time travel and running readers and streams
  safe). Below 168 hours the command refuses unless ``--force-retention`` is given, which
  also turns off Delta's check (``spark.databricks.delta.retentionDurationCheck.enabled =
  false``) and prints a warning: files a running stream or a long query still needs may go.
- ``--dry-run``: lists what would be done (files per table; files VACUUM would delete, by
  Delta's own ``VACUUM ... DRY RUN``), changes nothing.

Exit code 0; 2 for a refused retention; 1 when a table failed (the others are still done).

On an object store, a group whose writer lease a processing-time stream holds is refused
(``lakehouse.lease``), unless that stream keeps the group itself
(``pipelines.stream_maintenance``: its passes on time, none failed, and its VACUUM keeping
``--retention-hours`` unless ``--no-vacuum``): the command then says so and exits 0 without
touching it (``--json``: ``{"group", "skipped"}``); otherwise the refusal names why the stream's
maintenance does not do. ``all`` needs both leases.

VACUUM lists files with ``spark.sql.sources.parallelPartitionDiscovery.parallelism`` tasks
(Spark's default 10000, sized for clusters: minutes of empty tasks on ``local[2]``); unless
the Spark configuration sets it, this command uses twice the default parallelism meanwhile.

Each VACUUM lists the table's storage once: the files it deleted are read from the
``VACUUM END`` commit Delta logs for it. Delta logs VACUUM on most file systems but not on
``s3a://`` by default, because its S3 log store is safe with one writing driver only; this
command holds the writer leases of the jobs writing the tables (below), so it turns the
logging on for its VACUUMs (``spark.databricks.delta.vacuum.logging.enabled``) unless the
configuration sets it. Each VACUUM then adds two commits to the table's history
(``VACUUM START``, ``VACUUM END``), with no data change. Where the configuration turns the
logging (or commit info or history metrics) off, a ``DRY RUN`` counts the files first: a
second listing, the slow and billed part of a VACUUM on an object store.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from lakehouse.layout import LAYERS, Layout
from lakehouse.lease import WriterLeaseError, holds_no_lease, raise_if_lost
from lakehouse.tables import list_delta_tables, table_version
from pipelines.failure_line import failure_line
from pipelines.ops.common import emit, loaded_config, progress, table
from pipelines.ops.retention import (
    SAFE_RETENTION_HOURS,
    forced_retention,
    retention_as_asked,
    retention_check_off,
)
from pipelines.ops.unread_bronze import silver_unread_since, vacuum_unsafe
from pipelines.settings.clients import open_session, writer_lease
from pipelines.spark import configured
from pipelines.stream_maintenance import stream_keeps

log = logging.getLogger("pipelines.ops.maintain")

GROUPS = LAYERS


LISTING_PARALLELISM_CONF = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
VACUUM_LOGGING_CONF = "spark.databricks.delta.vacuum.logging.enabled"


@contextmanager
def listing_parallelism(spark: Any) -> Iterator[None]:
    """Size VACUUM's file listing to the session unless the configuration chose a value."""
    value = str(max(2, 2 * spark.sparkContext.defaultParallelism))
    with _unless_configured(spark, LISTING_PARALLELISM_CONF, value):
        yield


# Off, any of these leaves a VACUUM's END commit, or its count of deleted files, unrecorded.
_VACUUM_RECORD_CONFS = (
    VACUUM_LOGGING_CONF,
    "spark.databricks.delta.commitInfo.enabled",
    "spark.databricks.delta.history.metricsEnabled",
)


@contextmanager
def vacuum_logging(spark: Any) -> Iterator[bool]:
    """Have VACUUM log its commits unless the configuration says otherwise; yields whether
    the files a VACUUM deletes can be read from its ``VACUUM END`` commit."""
    for key in _VACUUM_RECORD_CONFS:
        configured = spark.conf.get(key, None)
        if configured is not None and configured.strip().lower() == "false":
            yield False
            return
    with _unless_configured(spark, VACUUM_LOGGING_CONF, "true"):
        yield True


@contextmanager
def _unless_configured(spark: Any, key: str, value: str) -> Iterator[None]:
    """``key`` = ``value`` in the session meanwhile, unless the configuration sets ``key``."""
    if configured(spark, key):
        yield
        return
    spark.conf.set(key, value)
    try:
        yield
    finally:
        spark.conf.unset(key)


def tables_of(spark: Any, lakehouse_path: str, group: str) -> list[str]:
    """Delta table paths of a group (``all``: every group)."""
    layout = Layout(lakehouse_path)
    groups = GROUPS if group == "all" else (group,)
    out: list[str] = []
    for g in groups:
        out.extend(list_delta_tables(layout.layer(g), spark))
    return out


def _sql_path(path: str) -> str:
    if "`" in path:
        raise ValueError(f"table path with a backtick cannot be maintained: {path!r}")
    return f"delta.`{path}`"


def maintain_table(
    spark: Any,
    path: str,
    *,
    retention_hours: float,
    optimize: bool,
    vacuum: bool,
    dry_run: bool,
    unread_since: float | None = None,
    still_writer: Callable[[], None] = holds_no_lease,
) -> dict[str, Any]:
    """Optimize and/or vacuum one table; return what was (or would be) done. VACUUM is
    skipped when ``unread_since`` (:func:`pipelines.ops.unread_bronze.vacuum_unsafe`) says so;
    ``still_writer`` is called again before it (see :func:`maintain`)."""
    from delta.tables import DeltaTable

    detail = spark.sql(f"DESCRIBE DETAIL {_sql_path(path)}").first()
    out: dict[str, Any] = {
        "table": path,
        "files_before": int(detail["numFiles"]),
        "bytes_before": int(detail["sizeInBytes"]),
    }
    if optimize and not dry_run:
        metrics = DeltaTable.forPath(spark, path).optimize().executeCompaction().first()
        m = metrics["metrics"] if metrics is not None else None
        out["optimize"] = {
            "files_added": int(m["numFilesAdded"]) if m else 0,
            "files_removed": int(m["numFilesRemoved"]) if m else 0,
        }
    why = vacuum_unsafe(unread_since, retention_hours) if vacuum else None
    if why is not None:
        log.warning("maintain: %s: VACUUM skipped: %s", path, why)
        out["vacuum"] = {"skipped": why}
    elif vacuum:
        still_writer()
        out["vacuum"] = _vacuum(spark, path, retention_hours, dry_run=dry_run)
    if not dry_run:
        after = spark.sql(f"DESCRIBE DETAIL {_sql_path(path)}").first()
        out["files_after"] = int(after["numFiles"])
    return out


def _vacuum(
    spark: Any, path: str, retention_hours: float, *, dry_run: bool
) -> dict[str, int | None]:
    """One table's VACUUM: ``files_deleted`` (a dry run: ``files_to_delete``)."""
    vacuum = f"VACUUM {_sql_path(path)} RETAIN {retention_hours:g} HOURS"
    with vacuum_logging(spark) as logged, retention_as_asked(spark):
        if dry_run or not logged:
            doomed = int(spark.sql(f"{vacuum} DRY RUN").count())
            if not dry_run:
                spark.sql(vacuum).collect()
            return {"files_to_delete" if dry_run else "files_deleted": doomed}
        before = table_version(path, spark)
        spark.sql(vacuum).collect()
        return {"files_deleted": _vacuumed_since(spark, path, before)}


def _vacuumed_since(spark: Any, path: str, version: int) -> int | None:
    """The files deleted by the VACUUM that began after ``version``: the first ``VACUUM END``
    commit after it (other writers may commit meanwhile; Delta's commits do not say which
    START an END closes, so two VACUUMs of one table at once may swap their counts). None,
    with a warning, when no END commit or count was recorded."""
    newer = table_version(path, spark) - version
    history = (
        spark.sql(f"DESCRIBE HISTORY {_sql_path(path)} LIMIT {newer}").collect() if newer else []
    )
    ends = [r for r in history if r["version"] > version and r["operation"] == "VACUUM END"]
    deleted = (ends[-1]["operationMetrics"] or {}).get("numDeletedFiles") if ends else None
    if deleted is None:
        log.warning("maintain: the VACUUM of %s recorded no count of deleted files", path)
        return None
    return int(deleted)


def maintain(
    spark: Any,
    lakehouse_path: str,
    *,
    group: str = "all",
    retention_hours: float = SAFE_RETENTION_HOURS,
    force_retention: bool = False,
    optimize: bool = True,
    vacuum: bool = True,
    dry_run: bool = False,
    show_progress: bool = True,
    still_writer: Callable[[], None] = holds_no_lease,
) -> dict[str, Any]:
    """Maintain every table of ``group``; ``still_writer`` is called before each table (it
    raises when this driver lost the writer lease it maintains under).

    Raises:
        RetentionRefusedError: ``retention_hours`` < 168 and not ``force_retention``.
        lakehouse.lease.WriterLeaseError: from ``still_writer``; the tables after it are not
            maintained.
    """
    forced = forced_retention(retention_hours, force_retention) if vacuum else False
    t0 = time.monotonic()
    paths = tables_of(spark, lakehouse_path, group)
    layout = Layout(lakehouse_path)
    results: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    with (
        progress(show_progress) as steps,
        listing_parallelism(spark),
        retention_check_off(spark, forced),
    ):
        for path in steps.track(paths, f"maintaining {len(paths)} tables"):
            still_writer()  # not one table's failure: every table after it is another driver's
            try:
                results.append(
                    maintain_table(
                        spark,
                        path,
                        retention_hours=retention_hours,
                        optimize=optimize,
                        vacuum=vacuum,
                        dry_run=dry_run,
                        unread_since=silver_unread_since(spark, layout, path) if vacuum else None,
                        still_writer=still_writer,
                    )
                )
            except WriterLeaseError:
                raise  # every table after it is another driver's too
            except Exception as exc:  # noqa: BLE001 - one table's failure must not stop the rest
                log.error("maintain: %s failed: %s", path, failure_line(exc))
                failed.append({"table": path, "error": failure_line(exc)})
    return {
        "group": group,
        "dry_run": dry_run,
        "retention_hours": retention_hours,
        "forced_retention": forced,
        "tables": results,
        "failed": failed,
        "seconds": round(time.monotonic() - t0, 3),
    }


def add_parser(subparsers: Any) -> None:
    """Register ``protolake maintain``."""
    p = subparsers.add_parser(
        "maintain",
        help="optimize and vacuum the Delta tables",
        description="OPTIMIZE and VACUUM every Delta table of a group with safe defaults.",
    )
    p.add_argument("--table-group", choices=(*GROUPS, "all"), default="all")
    p.add_argument("--retention-hours", type=float, default=float(SAFE_RETENTION_HOURS))
    p.add_argument(
        "--force-retention",
        action="store_true",
        help=f"allow --retention-hours below {SAFE_RETENTION_HOURS} (disables Delta's check)",
    )
    p.add_argument("--no-optimize", action="store_true")
    p.add_argument("--no-vacuum", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="report only, change nothing")
    p.set_defaults(func=run_from_args)


def run_from_args(args: argparse.Namespace) -> int:
    """``protolake maintain``."""
    cfg = loaded_config(args.config, missing_ok=True)
    if args.retention_hours < 0:
        print("protolake maintain: --retention-hours must be >= 0", file=sys.stderr)
        return 2
    if (
        not args.no_vacuum
        and args.retention_hours < SAFE_RETENTION_HOURS
        and not args.force_retention
    ):
        # refuse before starting Spark
        print(
            f"protolake maintain: --retention-hours {args.retention_hours:g} is below "
            f"{SAFE_RETENTION_HOURS} h; add --force-retention to allow it",
            file=sys.stderr,
        )
        return 2
    spark = open_session(cfg, "protolake-maintain")
    # maintain rewrites tables: on an object store, only while no job writes them (bronze's
    # lease guards the bronze tables, silver's the silver, quarantine and quality tables)
    jobs = () if args.dry_run else _writers_of(args.table_group)
    leases: list[Any] = []
    try:
        for job in jobs:  # one by one: a refused second lease releases the first (finally)
            lease = _lease_unless_kept(spark, cfg, job, args)
            if isinstance(lease, str):
                return _skipped(args.table_group, lease, args.json)
            leases.append(lease)
        raise_if_lost(leases)
        pruned = prune_results_of(spark, cfg, args.table_group, dry_run=args.dry_run)
        data = maintain(
            spark,
            cfg.lakehouse_path,
            group=args.table_group,
            retention_hours=args.retention_hours,
            force_retention=args.force_retention,
            optimize=not args.no_optimize,
            vacuum=not args.no_vacuum,
            dry_run=args.dry_run,
            still_writer=partial(raise_if_lost, leases),
        )
    finally:
        for lease in leases:
            if lease is not None:
                lease.release()
    if pruned is not None:
        data["quality_results_pruned"] = pruned
    emit(args.json, data, lambda console: render(console, data))
    return 1 if data["failed"] else 0


def _lease_unless_kept(spark: Any, cfg: Any, job: str, args: argparse.Namespace) -> Any:
    """``job``'s writer lease (None: a local lakehouse), or why the stream holding it keeps
    ``args.table_group`` as asked (``pipelines.stream_maintenance.stream_keeps``).

    Raises:
        WriterLeaseError: another driver holds it, and keeps no such group, or not as asked
            (the message then says why not).
    """
    try:
        return writer_lease(spark, cfg, job)
    except WriterLeaseError as exc:
        asked = {"retention_hours": args.retention_hours, "vacuum": not args.no_vacuum}
        kept = stream_keeps(exc.holder, args.table_group, **asked)
        if kept is None:
            raise
        if not kept[0]:  # the stream keeps the group, not as asked: say why not
            raise WriterLeaseError(f"{exc}; {kept[1]}", exc.holder) from exc
        return kept[1]


def _skipped(group: str, why: str, as_json: bool) -> int:
    """A group the stream holding its lease keeps: said, nothing done, exit code 0."""
    data = {"group": group, "skipped": why}
    emit(as_json, data, lambda console: console.print(f"maintain {group}: skipped, {why}"))
    return 0


def prune_results_of(spark: Any, cfg: Any, group: str, *, dry_run: bool) -> int | None:
    """For the quality group (or all): delete quality results older than the configured
    ``quality.results_retention_days`` before compaction, as silver does when it starts (a
    long-running stream would otherwise keep them until its next restart). None when not
    applied (another group, a dry run, or retention 0 = keep everything)."""
    if group not in ("quality", "all") or dry_run:
        return None
    from pipelines.quality_retention import prune_quality_results

    return prune_quality_results(spark, cfg)


def render(console: Any, data: dict[str, Any]) -> None:
    """The human view."""
    verb = "would maintain" if data["dry_run"] else "maintained"
    console.print(
        f"maintain: {verb} {len(data['tables'])} tables of group {data['group']} "
        f"(retention {data['retention_hours']:g} h, {data['seconds']} s)"
    )
    if "quality_results_pruned" in data:
        console.print(
            f"quality results older than the retention deleted: {data['quality_results_pruned']}"
        )
    rows = []
    for t in data["tables"]:
        opt = t.get("optimize") or {}
        vac = t.get("vacuum") or {}
        rows.append(
            [
                t["table"].rsplit("/", 2)[-2] + "/" + t["table"].rsplit("/", 1)[-1],
                t["files_before"],
                t.get("files_after"),
                opt.get("files_removed"),
                vac.get(
                    "files_deleted", vac.get("files_to_delete", vac.get("skipped") and "skipped")
                ),
            ]
        )
    console.print(
        table(
            "tables",
            ["table", "files before", "files after", "compacted", "vacuumed (or would)"],
            rows,
        )
    )
    for f in data["failed"]:
        console.print(f"[red]FAILED[/red] {f['table']}: {f['error']}")
    for t in data["tables"]:
        if "skipped" in (t.get("vacuum") or {}):
            console.print(f"[yellow]VACUUM skipped[/yellow] {t['table']}: {t['vacuum']['skipped']}")


def _writers_of(group: str) -> tuple[str, ...]:
    """The writer leases (``lakehouse.lease``) of the jobs writing a table group."""
    if group == "all":
        return ("bronze", "silver")
    return ("bronze",) if group == "bronze" else ("silver",)


def main(argv: Sequence[str] | None = None) -> int:
    from pipelines.cli import main as cli_main

    return cli_main(["maintain", *(argv or [])])
