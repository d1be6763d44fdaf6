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
- Exactly once: one streaming query, one checkpoint (:func:`bronze_checkpoint`). Per-topic
  mode routes rows inside one ``foreachBatch`` (:class:`pipelines.bronze_routing.TopicRouter`;
  with a topic pattern, topics appear at run time) and appends to each table with Delta's
  ``txnAppId``/``txnVersion = batch_id``, so a batch replayed after a crash is skipped by
  every table that already has it. The app id is a UUID kept inside the checkpoint folder: a
  new checkpoint means a new app id (reusing an old one would make Delta skip the new query's
  first batches). Single mode is Delta's own streaming sink, which does the same with the
  query id.
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

from lakehouse.catalog import layer_tables, register_table
from lakehouse.layout import BRONZE, Layout
from lakehouse.lease import stop_streams_on_loss, take_writer_lease
from lakehouse.streaming import (
    TRIGGERS,
    await_queries,
    load_app_id,
    stop_on_signals,
    with_trigger,
)
from pipelines import progress
from pipelines.bronze_routing import TopicRouter
from pipelines.naming import bronze_table_of_topic
from pipelines.settings import ConfigError, ProtolakeConfig, load_config
from pipelines.settings.clients import (
    kafka_source_options,
    loggable_config,
    open_session,
    prepare_session,
)

log = logging.getLogger(__name__)

JOB = "bronze"
# The Kafka source's columns, in the order bronze keeps them.
KAFKA_COLUMNS = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
    "headers",
)
BRONZE_COLUMNS = (*KAFKA_COLUMNS, "_ingested_at", "_ingest_date")


def bronze_table_path(cfg: ProtolakeConfig, table: str) -> str:
    """Path of one bronze Delta table."""
    return Layout(cfg.lakehouse_path).bronze_table(table)


def bronze_table_for(cfg: ProtolakeConfig, topic: str) -> str:
    """The table a topic's records land in under the configured table mode."""
    if cfg.bronze.table_mode == "single":
        return cfg.bronze.single_table
    return bronze_table_of_topic(topic)


def bronze_checkpoint(cfg: ProtolakeConfig) -> str:
    """The bronze query's checkpoint (``<lakehouse>/_checkpoints/bronze/<name>``).

    The name depends on the table mode so that switching modes starts a fresh query instead
    of resuming offsets that were written to other tables.
    """
    name = "per_topic" if cfg.bronze.table_mode == "per_topic" else cfg.bronze.single_table
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
        F.current_timestamp().alias("_ingested_at"),
    ).withColumn("_ingest_date", F.to_date(F.col("_ingested_at")))


def write_bronze(df: DataFrame, cfg: ProtolakeConfig, trigger: str) -> list[StreamingQuery]:
    """Start the bronze streaming query (see the module docstring for modes and guarantees).

    Args:
        df: bronze rows (:func:`to_bronze_rows` of :func:`read_kafka`), streaming.
        cfg: the configuration.
        trigger: ``available-now`` or ``processing-time``.

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
    if cfg.bronze.table_mode == "single":
        path = bronze_table_path(cfg, cfg.bronze.single_table)
        writer = writer.format("delta").outputMode("append")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        log.info("bronze: %s -> %s (checkpoint %s)", trigger, path, checkpoint)
        return [writer.start(path)]
    spark = df.sparkSession
    layout = Layout(cfg.lakehouse_path)
    from pipelines.metrics import bronze_batch_hook

    router = TopicRouter(
        table_path=layout.bronze_table,
        app_id=load_app_id(spark, checkpoint),
        partition_by=partition_by,
        known_topic=cfg.kafka.topics[0] if len(cfg.kafka.topics) == 1 else None,
        checkpoint=checkpoint,
        on_batch=bronze_batch_hook(query_name),
    )
    log.info("bronze: %s -> %s/<table> (checkpoint %s)", trigger, layout.bronze, checkpoint)
    return [writer.foreachBatch(router).start()]


def run(
    cfg: ProtolakeConfig,
    trigger: str | None = None,
    await_termination: bool = True,
    spark: SparkSession | None = None,
) -> list[StreamingQuery]:
    """Run bronze: read Kafka, shape rows, write Delta.

    Args:
        cfg: the configuration.
        trigger: overrides ``bronze.trigger``.
        await_termination: wait until the queries end (available-now) or fail; with
            processing-time this waits until they are stopped (see :func:`stop_on_signals`).
        spark: a session to use (given the ``[s3]`` settings); default:
            :func:`pipelines.settings.clients.open_session`.

    Raises:
        pyspark.errors.StreamingQueryException: a query failed.
    """
    trigger = trigger or cfg.bronze.trigger
    log.debug("bronze: configuration %s", json.dumps(loggable_config(cfg), sort_keys=True))
    if spark is None:
        spark = open_session(cfg, "protolake-bronze")
    else:
        prepare_session(spark, cfg)
    from pipelines.metrics import install_metrics

    install_metrics(spark, cfg)
    register_bronze(spark, cfg)
    # One driver writes the bronze tables of an object-store lakehouse (lakehouse.lease); a
    # lease of queries left running is renewed until this process ends.
    lease = take_writer_lease(spark, cfg.lakehouse_path, JOB, on_lost=stop_streams_on_loss(spark))
    try:
        queries = write_bronze(read_kafka(spark, cfg).transform(to_bronze_rows), cfg, trigger)
        if await_termination:
            await_queries(queries)
            register_bronze(spark, cfg)  # the tables this run created
    finally:
        if lease is not None and await_termination:
            lease.release()
            lease.raise_if_lost()  # the streams were stopped because the lease was lost
    return queries


def register_bronze(spark: SparkSession, cfg: ProtolakeConfig) -> list[str]:
    """Register every bronze table in ``catalog.bronze_database`` (none when it is empty).

    Bronze tables are created by the stream's first write to them; a run registers those that
    exist when it starts and, once its queries end, those it created (a processing-time run's
    new tables are named at its next start, or by silver's).
    """
    database = cfg.catalog.bronze_database
    if not database:
        return []
    layout = Layout(cfg.lakehouse_path)
    return [register_table(spark, database, p) for p in layer_tables(layout, BRONZE, spark)]


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
    queries = run(cfg, trigger=trigger, await_termination=False)
    stop_requested = stop_on_signals(queries, JOB)
    try:
        await_queries(queries)
    except Exception:
        if not stop_requested.is_set():
            raise
        # Asked to stop (and the JVM may have received the signal too): nothing is lost, the
        # checkpoint replays whatever batch was unfinished.
        log.warning("bronze: stopped on request; an unfinished batch is replayed on restart")
        return 0
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
        f"bronze: {summary['records']} records in {summary['batches']} batches "
        f"({summary['seconds']} s) -> {summary['tables']} [{summary['table_mode']}]"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pipelines.bronze --config FILE``: the same as ``protolake bronze``."""
    from pipelines.cli import main as cli_main

    return cli_main(["bronze", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
