"""The silver job: bronze Delta -> one Delta table per message type + quarantine.

One Structured Streaming query per bronze table (every table under ``<lakehouse>/bronze``,
or the ones given), each with its own checkpoint ``<lakehouse>/_checkpoints/silver/<table>``
and its own idempotent-write app id (a UUID kept inside that checkpoint folder: a new
checkpoint means a new app id). Each query's ``foreachBatch`` is a
:class:`pipelines.silver.batch.SilverBatch` (its module docstring has the steps of a
micro-batch and why a retry writes the same rows). Triggers:

- ``available-now``: one pass over the bronze tables that exist when the job starts, one
  query after the other, each until its table is drained; then the job ends. No bronze table
  yet (or a named one missing) is said in the log and the summary, and is no error: there is
  nothing to take yet.
- ``processing-time``: the job follows bronze as it grows. A
  :class:`lakehouse.streaming.TableWatcher` lists ``<lakehouse>/bronze`` every
  ``silver.table_discovery_seconds`` and starts a query for each table that appears (a new
  topic under ``kafka.topic_pattern``), without a restart; started before bronze has written
  anything, the job waits. The queries form one :class:`lakehouse.streaming.QueryGroup`:
  they run until stopped, and a failing one stops the job.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from codec import SchemaResolver
from lakehouse.catalog import register_lakehouse
from lakehouse.checkpoint_guard import CheckpointLocks, run_locks
from lakehouse.checkpoints import load_app_id, replays_of
from lakehouse.delta_stream import read_delta_stream
from lakehouse.layout import Layout, table_name
from lakehouse.lease import (
    WriterLease,
    WriterLeaseError,
    stop_streams_on_loss,
)
from lakehouse.streaming import (
    TRIGGERS,
    QueryGroup,
    TableWatcher,
    await_queries,
    stop_on_signals,
    with_trigger,
)
from lakehouse.tables import is_delta_table, list_delta_tables
from pipelines import progress
from pipelines.quality_retention import prune_quality_results
from pipelines.quarantine import ensure_quarantine_table
from pipelines.settings import ConfigError, ProtolakeConfig
from pipelines.settings.clients import (
    catalog_databases,
    open_resolver,
    open_session,
    prepare_session,
    writer_lease,
)
from pipelines.stream_maintenance import (
    MAINTAINER_WAIT_SECONDS,
    StreamMaintainer,
    start_maintainer,
)

from .batch import SilverBatch
from .stats import RunTotals

log = logging.getLogger("pipelines.silver")
JOB = "silver"


def bronze_tables(
    lakehouse_path: str, spark: SparkSession, names: Sequence[str] | None = None
) -> list[str]:
    """Bronze table paths to read: the named ones (whether they exist or not), or every Delta
    table under bronze/."""
    layout = Layout(lakehouse_path)
    if names:
        return [layout.bronze_table(n) for n in names]
    return list_delta_tables(layout.bronze, spark)


def start_query(
    spark: SparkSession,
    cfg: ProtolakeConfig,
    bronze_path: str,
    trigger: str,
    resolver: SchemaResolver,
    checker: Any = None,
    locks: CheckpointLocks | None = None,
) -> tuple[StreamingQuery, SilverBatch]:
    """Start the silver query of one bronze table (its local checkpoint locked in ``locks``;
    default: a lock held until the process exits)."""
    name = table_name(bronze_path)
    layout = Layout(cfg.lakehouse_path)
    checkpoint = layout.checkpoint(JOB, name)
    # locked before reading which batch may be a replay
    (locks if locks is not None else CheckpointLocks()).take(checkpoint)
    batch = SilverBatch(
        spark,
        cfg.lakehouse_path,
        load_app_id(spark, checkpoint),
        resolver,
        replays=replays_of(spark, checkpoint),
        max_depth=cfg.silver.max_recursion_depth,
        allow_unknown_fields=cfg.silver.keep_unknown_fields,
        native=cfg.silver.native_decoder,
        cache_bronze=cfg.silver.cache_bronze,
        databases=catalog_databases(cfg),
        checker=checker,
    )
    from pipelines.metrics import silver_batch_hook

    batch.on_batch = silver_batch_hook(f"silver_{name}")
    writer = (
        read_delta_stream(spark, bronze_path)
        .writeStream.queryName(f"silver_{name}")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(batch)
    )
    if trigger not in TRIGGERS:
        raise ConfigError(f"trigger: must be one of {', '.join(TRIGGERS)}, got {trigger!r}")
    writer = with_trigger(writer, trigger, cfg.silver.processing_interval)
    log.info(
        "silver: %s -> %s (checkpoint %s, %s)", bronze_path, layout.silver, checkpoint, trigger
    )
    query = writer.start()
    progress.say("silver  taking bronze table %s (%s)", name, trigger)
    return query, batch


@dataclass
class SilverRun:
    """The queries of one run and their batch functions (for summaries and tests).

    ``group`` holds the queries (it grows while a processing-time run follows bronze);
    ``missing`` names the requested bronze tables an available-now run did not find;
    ``maintainer`` keeps the tables of a processing-time run on an object store, under
    ``lease``, the run's writer lease there (a caller that did not await the run stops the
    group and the maintainer, then releases it).
    """

    group: QueryGroup = field(default_factory=QueryGroup)
    batches: list[SilverBatch] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    watcher: TableWatcher | None = None
    maintainer: StreamMaintainer | None = None
    lease: WriterLease | None = None

    @property
    def queries(self) -> list[StreamingQuery]:
        """The queries started so far."""
        return self.group.queries


def make_checker(spark: SparkSession, cfg: ProtolakeConfig) -> Any:
    """The quality checker (a ``quality.checker.QualityChecker``).

    The checker validates every silver table, configured expectations or not (the default suite:
    lineage not null, Kafka coordinates unique, Kafka timestamps within bounds). None only when
    the quality extra (Great Expectations) is not installed and no expectation is configured;
    configured expectations without it are a :class:`ConfigError`.
    """
    import importlib.util

    if importlib.util.find_spec("great_expectations") is None:
        if cfg.quality.expectations:
            raise ConfigError(
                "quality.expectations: Great Expectations is not installed "
                "(pip install protolake[quality])"
            )
        log.warning(
            "silver: Great Expectations is not installed (protolake[quality]): "
            "the silver tables are NOT checked"
        )
        return None
    from quality.checker import QualityChecker
    from quality.rules import QualityConfigError, parse_rules

    try:
        rules = parse_rules(cfg.quality.expectations)
        checker = QualityChecker(spark, cfg.lakehouse_path, rules)
    except QualityConfigError as exc:
        raise ConfigError(str(exc)) from exc
    return checker


def run(
    cfg: ProtolakeConfig,
    trigger: str | None = None,
    *,
    spark: SparkSession | None = None,
    bronze_table_names: Sequence[str] | None = None,
    await_termination: bool = True,
    resolver: SchemaResolver | None = None,
    handle_signals: bool = False,
) -> SilverRun:
    """Run silver over the bronze tables.

    Args:
        cfg: the configuration.
        trigger: overrides ``silver.trigger``.
        spark: a session (given the ``[s3]`` settings; default:
            :func:`pipelines.settings.clients.open_session`).
        bronze_table_names: bronze tables to read (default: all under ``<lakehouse>/bronze``,
            and with processing-time each one that appears later).
        await_termination: wait for the queries (available-now: until drained, one query
            after the other; processing-time: until stopped). With False, available-now
            queries are still started together and returned running, and a processing-time
            run returns following bronze (``result.group.stop()`` ends it; on an object store
            stop ``result.maintainer`` too, then release ``result.lease``).
        resolver: a schema resolver to use (default: :func:`open_resolver`).
        handle_signals: SIGTERM/SIGINT stop a processing-time run, which then ends without
            an error unless a query or the table watcher had failed before the signal came
            (the command line's choice).

    Only an awaited run releases its writer lease and its checkpoints' locks
    (:mod:`lakehouse.checkpoint_guard`); a run that lost the lease raises
    :class:`lakehouse.lease.WriterLeaseError` (the queries were stopped).

    Raises:
        pyspark.errors.StreamingQueryException: a batch failed (e.g. the registry is down).
        lakehouse.checkpoint_guard.CheckpointInUseError: another process runs one of the
            queries' local checkpoints.
    """
    trigger = trigger or cfg.silver.trigger
    if trigger not in TRIGGERS:
        raise ConfigError(f"trigger: must be one of {', '.join(TRIGGERS)}, got {trigger!r}")
    if spark is None:
        spark = open_session(cfg, "protolake-silver")
    else:
        prepare_session(spark, cfg)
    resolver = resolver or open_resolver(cfg)
    from pipelines.metrics import install_metrics

    install_metrics(spark, cfg, JOB)
    # One driver writes silver, quarantine and quality results of an object-store lakehouse
    # (lakehouse.lease); a lease of queries left running is renewed until this process ends.
    lease = writer_lease(spark, cfg, JOB, on_lost=stop_streams_on_loss(spark))
    try:
        with run_locks(await_termination) as locks:
            return _start_queries(
                spark,
                cfg,
                trigger,
                resolver,
                bronze_table_names,
                await_termination,
                lease,
                handle_signals,
                locks,
            )
    finally:
        if lease is not None and await_termination:
            lease.release()
            lease.raise_if_lost()  # the streams were stopped because the lease was lost


def _start_queries(
    spark: SparkSession,
    cfg: ProtolakeConfig,
    trigger: str,
    resolver: SchemaResolver,
    bronze_table_names: Sequence[str] | None,
    await_termination: bool,
    lease: WriterLease | None = None,
    handle_signals: bool = False,
    locks: CheckpointLocks | None = None,
) -> SilverRun:
    """Start silver's queries (one per bronze table) and, if asked, wait for them.

    A lost writer ``lease`` fails and stops the processing-time group (its watcher and every
    query); available-now starts no query after the loss.
    """
    checker = make_checker(spark, cfg)
    if checker is not None:
        prune_quality_results(spark, cfg)
    # the catalog may be new (the session's own, or a new metastore): name every table of the
    # lakehouse there, the quarantine included even before its first record
    if cfg.catalog.quarantine_database:
        ensure_quarantine_table(spark, cfg.lakehouse_path)
    register_lakehouse(spark, Layout(cfg.lakehouse_path), catalog_databases(cfg))
    if trigger == "processing-time":
        out = follow_bronze(spark, cfg, resolver, checker, bronze_table_names, locks)
        out.lease = lease
        if lease is not None:
            where = lease.location
            lease.call_on_loss(lambda why: _fail(out.group, WriterLeaseError(f"{where}: {why}")))
        group = out.group
        out.maintainer = start_maintainer(
            spark, cfg, JOB, trigger, lease, lambda: not group.stopping
        )
        if await_termination:
            try:
                _await_group(out.group, handle_signals)
            finally:  # before the lease goes: a pass under way commits under it
                if out.maintainer is not None:
                    out.maintainer.stop(timeout=MAINTAINER_WAIT_SECONDS)
    else:
        out = take_available(
            spark, cfg, resolver, checker, bronze_table_names, await_termination, lease, locks
        )
    if checker is not None and await_termination:
        checker.build_data_docs()
    return out


def take_available(
    spark: SparkSession,
    cfg: ProtolakeConfig,
    resolver: SchemaResolver,
    checker: Any,
    names: Sequence[str] | None,
    await_termination: bool,
    lease: WriterLease | None = None,
    locks: CheckpointLocks | None = None,
) -> SilverRun:
    """Available-now: one query per bronze table there now (one after the other when awaited;
    none after the writer ``lease`` was lost). When one cannot start or fails, those started
    are stopped before the error is raised."""
    layout = Layout(cfg.lakehouse_path)
    paths = bronze_tables(cfg.lakehouse_path, spark, names)
    out = SilverRun()
    if names:
        out.missing = [table_name(p) for p in paths if not is_delta_table(p, spark)]
        paths = [p for p in paths if table_name(p) not in out.missing]
        if out.missing:
            log.warning(
                "silver: no bronze table %s under %s yet; nothing to take from it",
                ", ".join(out.missing),
                layout.bronze,
            )
    elif not paths:
        log.warning("silver: no bronze table under %s yet; nothing to take", layout.bronze)
    try:
        for path in paths:
            if lease is not None:
                lease.raise_if_lost()
            query, batch = start_query(spark, cfg, path, "available-now", resolver, checker, locks)
            out.group.add(query)
            out.batches.append(batch)
            if await_termination:
                await_queries([query])
    except BaseException:
        out.group.stop()  # a query left running would hold its checkpoint with no one to await it
        raise
    return out


def _fail(group: QueryGroup, error: BaseException) -> None:
    group.fail(error)
    group.stop()


def _await_group(group: QueryGroup, handle_signals: bool) -> None:
    stop_requested = stop_on_signals(group, JOB) if handle_signals else None
    try:
        group.await_all()
    except Exception:
        if stop_requested is None or not stop_requested.explains_failure():
            raise
        log.warning("silver: stopped on request; an unfinished batch is replayed on restart")


def follow_bronze(
    spark: SparkSession,
    cfg: ProtolakeConfig,
    resolver: SchemaResolver,
    checker: Any,
    names: Sequence[str] | None,
    locks: CheckpointLocks | None = None,
) -> SilverRun:
    """Processing-time: a query per bronze table there now, then per table that appears.

    Returns at once; the watcher keeps polling (until every named table has a query, or the
    group is stopped) and adds each new query to ``out.group``. When a first query cannot
    start, those started already are stopped before the error is raised.
    """
    out = SilverRun(group=QueryGroup(growing=True))
    lock = threading.Lock()

    def start_one(path: str) -> None:
        with lock:
            if out.group.stopping:
                return
            query, batch = start_query(
                spark, cfg, path, "processing-time", resolver, checker, locks
            )
            out.batches.append(batch)
            out.group.add(query)

    bronze = Layout(cfg.lakehouse_path).bronze
    watcher = TableWatcher(
        spark,
        bronze,
        start_one,
        cfg.silver.table_discovery_seconds,
        names=set(names) if names else None,
        on_error=out.group.fail,
        on_done=out.group.done_growing,
    )
    out.watcher = watcher
    out.group.on_stop(watcher.stop)
    try:
        started = watcher.poll()
    except BaseException:
        out.group.stop()
        raise
    if watcher.complete:
        out.group.done_growing()
        return out
    waiting_for = ", ".join(sorted(set(names or ()) - watcher.seen)) if names else "new tables"
    log.info(
        "silver: %d queries; waiting for %s under %s (every %s s)",
        len(started),
        waiting_for,
        bronze,
        cfg.silver.table_discovery_seconds,
    )
    progress.say("silver  waiting for %s under %s", waiting_for, bronze)
    watcher.start()
    return out


def summarize(result: SilverRun, cfg: ProtolakeConfig) -> dict[str, Any]:
    """Records, silver rows per table and quarantined rows per reason over a run."""
    totals = RunTotals()
    for b in result.batches:
        totals.merge(b.totals)
    return {
        "job": JOB,
        "batches": totals.batches,
        "records": totals.records,
        "quarantined": dict(sorted(totals.quarantined.items())),
        "tables": sorted(totals.tables),
        "silver_root": Layout(cfg.lakehouse_path).silver,
        "bronze_tables": len(result.batches),
        "bronze_root": Layout(cfg.lakehouse_path).bronze,
        "missing": list(result.missing),
    }
