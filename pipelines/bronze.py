"""Bronze: land Kafka records in Delta exactly as they arrived, exactly once.

Contract (docs/contracts.md, "Lakehouse layout"):

- Source: Spark's Kafka source, subscribed to ``kafka.topics`` or ``kafka.topic_pattern``,
  with ``startingOffsets``, ``failOnDataLoss``, ``maxOffsetsPerTrigger`` (when > 0) and
  ``includeHeaders`` from the configuration; every ``[kafka.options]`` entry is passed as
  ``kafka.<key>`` (SASL, SSL, ...). Option values are never logged: only their keys.
- Isolation: ``kafka.isolation.level = read_committed`` unless ``[kafka.options]`` sets
  ``isolation.level``: records of aborted (or still open) transactions never reach bronze. The
  offsets that transaction markers and aborted records take are gaps in bronze; Spark's Kafka
  source skips them without tripping ``failOnDataLoss`` (the offsets are still in the log),
  and ``protolake audit`` reads each gap back from Kafka to tell it from a loss.
- Rows: ``key binary, value binary, topic string, partition int, offset long,
  timestamp timestamp, timestampType int, headers array<struct<key:string,value:binary>>,
  _ingested_at timestamp, _ingest_date date``. Bytes are never decoded here.
- Tables: ``bronze.table_mode = "per_topic"`` writes ``<lakehouse>/bronze/<table>`` with
  ``table = pipelines.naming.bronze_table_of_topic(topic)`` (every character outside
  ``[A-Za-z0-9_]`` becomes ``_``, lowercased; topics that differ only there share a table and
  are told apart by the ``topic`` column). ``"single"`` writes every topic to
  ``<lakehouse>/bronze/<bronze.single_table>``. Tables are partitioned by
  ``bronze.partition_by`` (default ``_ingest_date``).
- Exactly once: one streaming query, one checkpoint (:func:`bronze_checkpoint`). Its
  ``foreachBatch`` (:class:`pipelines.bronze_routing.TopicRouter`) routes the rows to their
  tables (with a topic pattern, topics appear at run time; single mode has one table for
  them all) and appends to each table with the app id and ``batch_id`` in the commit
  (``lakehouse.delta.append_idempotent``; a small batch of a local lakehouse's existing
  tables by delta-rs, in the driver), so a batch replayed after a crash is skipped by every
  table that already has it. The app id is a UUID kept inside the checkpoint folder: a new
  checkpoint means a new app id (reusing an old one would skip the new query's first batch
  when it is a replay). A single-table checkpoint that Spark's Delta sink wrote (which
  commits under the query id) keeps that id as its app id
  (``lakehouse.checkpoints.load_app_id``), so it goes on exactly once.
- Triggers: ``available-now`` (take what is there, in one or more batches, stop) and
  ``processing-time`` (``bronze.processing_interval``; runs until stopped).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the idiom every Spark reader knows
from pyspark.sql.streaming import StreamingQuery

from lakehouse.bronze_columns import INGEST_DATE, INGESTED_AT, KAFKA_COLUMNS
from lakehouse.catalog import layer_tables, register_or_defer, register_table
from lakehouse.checkpoint_guard import CheckpointLocks, run_locks
from lakehouse.checkpoints import load_app_id, replays_of
from lakehouse.layout import BRONZE, Layout, table_name
from lakehouse.lease import stop_streams_on_loss
from lakehouse.streaming import TRIGGERS, await_queries, stop_on_signals, with_trigger
from lakehouse.tables import is_delta_table, table_properties
from pipelines import progress
from pipelines.bronze_routing import TopicRouter, one_table
from pipelines.naming import KAFKA_TOPICS_PROPERTY, bronze_query_name, bronze_table_of_topic
from pipelines.settings import ConfigError, ProtolakeConfig, load_config
from pipelines.settings.clients import (
    check_kafka,
    kafka_source_options,
    loggable_config,
    open_session,
    prepare_session,
    writer_lease,
)
from pipelines.stream_maintenance import MAINTAINER_WAIT_SECONDS, start_maintainer

log = logging.getLogger(__name__)

JOB = "bronze"


def bronze_table_path(cfg: ProtolakeConfig, table: str) -> str:
    """Path of one bronze Delta table."""
    return Layout(cfg.lakehouse_path).bronze_table(table)


def bronze_table_for(cfg: ProtolakeConfig, topic: str) -> str:
    """The table a topic's records land in under the configured table mode."""
    if cfg.bronze.table_mode == "single":
        return cfg.bronze.single_table
    return bronze_table_of_topic(topic)


def bronze_checkpoint(cfg: ProtolakeConfig) -> str:
    """The bronze query's checkpoint (``<lakehouse>/_checkpoints/bronze/<name>``, the name by
    :func:`pipelines.naming.bronze_query_name`)."""
    name = bronze_query_name(cfg.bronze.table_mode, cfg.bronze.single_table)
    return Layout(cfg.lakehouse_path).checkpoint(JOB, name)


def read_kafka(spark: SparkSession, cfg: ProtolakeConfig) -> DataFrame:
    """Open the Kafka source as a streaming DataFrame (Spark's Kafka schema, with headers)."""
    opts = kafka_source_options(cfg)
    source = f"topics {list(cfg.kafka.topics)}" if cfg.kafka.topics else "pattern"
    log.info(
        "bronze: reading Kafka %s from %s, options %s",
        source if cfg.kafka.topics else f"pattern {cfg.kafka.topic_pattern!r}",
        cfg.kafka.bootstrap_servers,
        sorted(opts),  # keys only: values may hold credentials
    )
    return spark.readStream.format("kafka").options(**opts).load()


def to_bronze_rows(df: DataFrame) -> DataFrame:
    """Kafka source rows -> bronze rows: the record untouched, plus when it was ingested.

    ``_ingested_at`` is the micro-batch's timestamp (the same for a batch replayed after a
    crash, since Spark keeps it in the offset log); ``_ingest_date`` is its date in the
    session time zone (UTC in protolake's sessions).
    """
    return df.select(
        *(F.col(c) for c in KAFKA_COLUMNS),
        F.current_timestamp().alias(INGESTED_AT),
    ).withColumn(INGEST_DATE, F.to_date(F.col(INGESTED_AT)))


def write_bronze(
    df: DataFrame, cfg: ProtolakeConfig, trigger: str, locks: CheckpointLocks | None = None
) -> list[StreamingQuery]:
    """Start the bronze streaming query (see the module docstring for modes and guarantees).

    Args:
        df: bronze rows (:func:`to_bronze_rows` of :func:`read_kafka`), streaming.
        cfg: the configuration.
        trigger: ``available-now`` or ``processing-time``.
        locks: where the run keeps its lock of a local checkpoint (default: a
            lock held until the process exits).

    Returns:
        The started queries (one).

    Raises:
        ConfigError: unknown trigger, or a partition column that is not a bronze column.
    """
    partition_by = tuple(cfg.bronze.partition_by)
    unknown = [c for c in partition_by if c not in df.columns]
    if unknown:
        raise ConfigError(
            f"bronze.partition_by: {', '.join(unknown)} not a bronze column "
            f"(columns: {', '.join(df.columns)})"
        )
    checkpoint = bronze_checkpoint(cfg)
    query_name = f"protolake-bronze-{cfg.bronze.table_mode}"
    writer = df.writeStream.queryName(query_name).option("checkpointLocation", checkpoint)
    if trigger not in TRIGGERS:
        raise ConfigError(f"trigger: must be one of {', '.join(TRIGGERS)}, got {trigger!r}")
    writer = with_trigger(writer, trigger, cfg.bronze.processing_interval)
    spark = df.sparkSession
    layout = Layout(cfg.lakehouse_path)
    from pipelines.metrics import bronze_batch_hook

    if cfg.bronze.table_mode == "single":
        path = bronze_table_path(cfg, cfg.bronze.single_table)
        if cfg.catalog.bronze_database:
            # named before the query starts (a new table created empty)
            if not is_delta_table(path, spark):
                create_empty_table(df, path, partition_by)
            register_bronze(spark, cfg)
        table_of, on_tables, target = one_table(cfg.bronze.single_table), None, path
    else:
        table_of, target = bronze_table_of_topic, f"{layout.bronze}/<table>"
        on_tables = BronzeRegistrar(spark, cfg) if cfg.catalog.bronze_database else None
    # locked before reading which batch may be a replay
    (locks if locks is not None else CheckpointLocks()).take(checkpoint)
    router = TopicRouter(
        table_path=layout.bronze_table,
        app_id=load_app_id(spark, checkpoint),
        partition_by=partition_by,
        known_topic=cfg.kafka.topics[0] if len(cfg.kafka.topics) == 1 else None,
        checkpoint=checkpoint,
        replays=replays_of(spark, checkpoint),
        on_batch=bronze_batch_hook(query_name),
        on_tables=on_tables,
        table_of=table_of,
    )
    log.info("bronze: %s -> %s (checkpoint %s)", trigger, target, checkpoint)
    return [writer.foreachBatch(router).start()]


def run(
    cfg: ProtolakeConfig,
    trigger: str | None = None,
    await_termination: bool = True,
    spark: SparkSession | None = None,
    handle_signals: bool = False,
) -> list[StreamingQuery]:
    """Run bronze: read Kafka, shape rows, write Delta.

    Args:
        cfg: the configuration.
        trigger: overrides ``bronze.trigger``.
        await_termination: wait until the queries end (available-now) or fail; with
            processing-time this waits until they are stopped. Only an awaited run releases
            its writer lease and raises :class:`lakehouse.lease.WriterLeaseError` when it
            lost it (a processing-time run's maintenance on an object store,
            ``pipelines.stream_maintenance``, ends once its queries have stopped).
        spark: a session to use (given the ``[s3]`` settings); default:
            :func:`pipelines.settings.clients.open_session`.
        handle_signals: SIGTERM/SIGINT stop the queries (:func:`stop_on_signals`; the
            command line's choice), and the run then ends without an error, unless a query
            had failed before the signal came (that failure is raised).

    Raises:
        pyspark.errors.StreamingQueryException: a query failed.
        lakehouse.lease.WriterLeaseError: another driver holds (or took) the writer lease, or
            another process runs the query's local checkpoint
            (``lakehouse.checkpoint_guard.CheckpointInUseError``).
    """
    trigger = trigger or cfg.bronze.trigger
    log.debug("bronze: configuration %s", json.dumps(loggable_config(cfg), sort_keys=True))
    if spark is None:
        spark = open_session(cfg, "protolake-bronze")
    else:
        prepare_session(spark, cfg)
    from pipelines.metrics import install_metrics

    install_metrics(spark, cfg, JOB)
    # One driver writes the bronze tables of an object-store lakehouse (lakehouse.lease),
    # their catalog comments included; a lease of queries left running is renewed until this
    # process ends.
    lease = writer_lease(spark, cfg, JOB, on_lost=stop_streams_on_loss(spark))
    maintainer = None
    try:
        with run_locks(await_termination) as locks:
            register_bronze(spark, cfg)
            rows = read_kafka(spark, cfg).transform(to_bronze_rows)
            queries = write_bronze(rows, cfg, trigger, locks)
            maintainer = start_maintainer(
                spark, cfg, JOB, trigger, lease, lambda: any(q.isActive for q in queries)
            )
            if await_termination:
                _await(queries, handle_signals)
                if lease is not None:
                    lease.raise_if_lost()  # the streams stopped because the lease was lost
                register_bronze(spark, cfg)  # the tables this run created
    finally:
        if maintainer is not None and await_termination:
            maintainer.stop(timeout=MAINTAINER_WAIT_SECONDS)
        if lease is not None and await_termination:
            lease.release()
    return queries


def _await(queries: list[StreamingQuery], handle_signals: bool) -> None:
    stop_requested = stop_on_signals(queries, JOB) if handle_signals else None
    try:
        await_queries(queries)
    except Exception:
        if stop_requested is None or not stop_requested.explains_failure():
            raise
        # Asked to stop (and the JVM may have received the signal too): nothing is lost, the
        # checkpoint replays whatever batch was unfinished.
        log.warning("bronze: stopped on request; an unfinished batch is replayed on restart")


def create_empty_table(df: DataFrame, path: str, partition_by: Sequence[str]) -> None:
    """An empty Delta table at ``path`` with the schema and partitioning of stream ``df``."""
    empty = df.sparkSession.createDataFrame([], df.schema).write.format("delta")
    if partition_by:
        empty = empty.partitionBy(*partition_by)
    empty.mode("append").save(path)


def describe_bronze_table(topics: Sequence[str]) -> tuple[str, dict[str, str]]:
    """The catalog comment and properties of a bronze table holding ``topics``' records."""
    listed = ", ".join(topics)
    comment = (
        f"Kafka records of topic{'s' if len(topics) > 1 else ''} {listed} as they arrived, landed "
        "by protolake bronze: key, value and headers are the record's bytes, not decoded (silver "
        "decodes them); one row per record."
    )
    return comment, {KAFKA_TOPICS_PROPERTY: ",".join(topics)}


def configured_topics(cfg: ProtolakeConfig, table: str) -> list[str]:
    """The configured topics (``kafka.topics``) whose records land in bronze table ``table``."""
    return sorted(t for t in cfg.kafka.topics if bronze_table_for(cfg, t) == table)


def register_bronze(spark: SparkSession, cfg: ProtolakeConfig) -> list[str]:
    """Register every bronze table in ``catalog.bronze_database`` (none when it is empty).

    Bronze tables are created by the stream's first write to them; a run registers those that
    exist when it starts and, once its queries end, those it created. In single mode the table
    is created empty before the query starts (:func:`create_empty_table`), so it is named at once.
    In per-topic mode a running query also registers each table when its first batch creates
    it, and again when a topic it did not hold arrives (:class:`BronzeRegistrar`). A table's comment names its
    topics when the configuration lists them; with a topic pattern, what a per-topic query
    registered (a single table then has no topics in its comment).
    """
    database = cfg.catalog.bronze_database
    if not database:
        return []
    out = []
    for path in layer_tables(Layout(cfg.lakehouse_path), BRONZE, spark):
        topics = configured_topics(cfg, table_name(path))
        comment, properties = describe_bronze_table(topics) if topics else ("", {})
        out.append(register_table(spark, database, path, comment=comment, properties=properties))
    return out


class BronzeRegistrar:
    """A ``TopicRouter.on_tables`` callback: registers a bronze table when a batch first
    writes it, and again when it brings a topic the table's comment does not name yet."""

    def __init__(self, spark: SparkSession, cfg: ProtolakeConfig) -> None:
        self.spark = spark
        self.database = cfg.catalog.bronze_database
        self.layout = Layout(cfg.lakehouse_path)
        self.topics: dict[str, set[str]] = {}  # table -> topics registered

    def __call__(self, tables: dict[str, list[str]]) -> None:
        for table, topics in tables.items():
            path = self.layout.bronze_table(table)
            if table not in self.topics:
                self.topics[table] = set(registered_topics(self.spark, path))
            if set(topics) <= self.topics[table] or not is_delta_table(path, self.spark):
                continue
            merged = sorted(self.topics[table] | set(topics))
            comment, properties = describe_bronze_table(merged)
            registered = register_or_defer(
                self.spark, self.database, path, comment=comment, properties=properties
            )
            if registered is None:  # the metastore is down: a later batch registers it
                self.topics.pop(table, None)
                continue
            self.topics[table] = set(merged)


def registered_topics(spark: SparkSession, path: str) -> list[str]:
    """The topics the bronze table at ``path`` names in its properties (none: a new table)."""
    topics = table_properties(spark, path).get(KAFKA_TOPICS_PROPERTY, "")
    return [t for t in topics.split(",") if t]


def summarize(queries: Sequence[StreamingQuery], cfg: ProtolakeConfig) -> dict[str, Any]:
    """What the queries did, from their progress reports (the last 100 batches at most)."""
    batches = [p for q in queries for p in q.recentProgress]
    rows = sum(int(p.numInputRows) for p in batches)
    return {
        "job": JOB,
        "table_mode": cfg.bronze.table_mode,
        "tables": Layout(cfg.lakehouse_path).bronze,
        "checkpoint": bronze_checkpoint(cfg),
        "batches": len(batches),
        "records": rows,
    }


# --- command line (protolake bronze; see pipelines/cli.py) ---------------------------------


def add_parser(subparsers: Any) -> None:
    """Register ``protolake bronze`` (cli.py adds --config, --trigger, --json, -v)."""
    parser = subparsers.add_parser(
        "bronze",
        help="land Kafka records in bronze Delta tables, exactly once",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.set_defaults(func=run_from_args)


def run_from_args(args: argparse.Namespace) -> int:
    """``protolake bronze``: load the configuration, run, print a summary."""
    cfg = load_config(args.config)
    t0 = time.monotonic()
    trigger = args.trigger or cfg.bronze.trigger
    source = (
        f"topics {', '.join(cfg.kafka.topics)}"
        if cfg.kafka.topics
        else f"topic pattern {cfg.kafka.topic_pattern!r}"
    )
    progress.say("bronze  %s -> %s (%s)", source, Layout(cfg.lakehouse_path).bronze, trigger)
    check_kafka(cfg)
    queries = run(cfg, trigger=trigger, handle_signals=True)
    summary = summarize(queries, cfg) | {"seconds": round(time.monotonic() - t0, 3)}
    _print_summary(summary, as_json=bool(getattr(args, "json", False)))
    return 0


def _print_summary(
    summary: dict[str, Any], as_json: bool, out: Callable[[str], Any] = print
) -> None:
    if as_json:
        out(json.dumps(summary, sort_keys=True))
        return
    out(
        f"bronze: {summary['records']} records in {summary['batches']} "
        f"{'batch' if summary['batches'] == 1 else 'batches'} "
        f"({summary['seconds']} s) -> {summary['tables']} [{summary['table_mode']}]"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pipelines.bronze --config FILE``: the same as ``protolake bronze``."""
    from pipelines.cli import main as cli_main

    return cli_main(["bronze", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
