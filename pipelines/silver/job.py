"""The silver job: bronze Delta -> one Delta table per message type + quarantine.

One Structured Streaming query per bronze table (every table under ``<lakehouse>/bronze``,
or the ones given), each with its own checkpoint ``<lakehouse>/_checkpoints/silver/<table>``
and its own idempotent-write app id (a UUID kept inside that checkpoint folder: a new
checkpoint means a new app id). Triggers: ``available-now`` (queries run one after the
other, each until its bronze table is drained) and ``processing-time`` (all run together
until stopped). Each query's ``foreachBatch`` is a :class:`pipelines.silver.batch.SilverBatch`
(its module docstring has the steps of a micro-batch and why a retry writes the same rows).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from codec import SchemaResolver
from lakehouse.delta import list_delta_tables
from lakehouse.layout import Layout, table_name
from lakehouse.lease import take_writer_lease
from lakehouse.streaming import TRIGGERS, await_queries, load_app_id, with_trigger
from pipelines.quality_retention import prune_quality_results
from pipelines.settings import ConfigError, ProtolakeConfig
from pipelines.settings.clients import open_resolver, open_session, prepare_session

from .batch import SilverBatch
from .tables import register_tables

log = logging.getLogger("pipelines.silver")
JOB = "silver"


def bronze_tables(
    lakehouse_path: str, spark: SparkSession, names: Sequence[str] | None = None
) -> list[str]:
    """Bronze table paths to read: the named ones, or every Delta table under bronze/."""
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
) -> tuple[StreamingQuery, SilverBatch]:
    """Start the silver query of one bronze table."""
    name = table_name(bronze_path)
    layout = Layout(cfg.lakehouse_path)
    checkpoint = layout.checkpoint(JOB, name)
    batch = SilverBatch(
        spark,
        cfg.lakehouse_path,
        load_app_id(spark, checkpoint),
        resolver,
        max_depth=cfg.silver.max_recursion_depth,
        allow_unknown_fields=cfg.silver.keep_unknown_fields,
        native=cfg.silver.native_decoder,
        cache_bronze=cfg.silver.cache_bronze,
        database=cfg.silver.catalog_database,
        checker=checker,
    )
    from pipelines.metrics import silver_batch_hook

    batch.on_batch = silver_batch_hook(f"silver_{name}")
    writer = (
        spark.readStream.format("delta")
        .load(bronze_path)
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
    return writer.start(), batch


@dataclass
class SilverRun:
    """The queries of one run and their batch functions (for summaries and tests)."""

    queries: list[StreamingQuery] = field(default_factory=list)
    batches: list[SilverBatch] = field(default_factory=list)


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
) -> SilverRun:
    """Run silver over the bronze tables.

    Args:
        cfg: the configuration.
        trigger: overrides ``silver.trigger``.
        spark: a session (given the ``[s3]`` settings; default:
            :func:`pipelines.settings.clients.open_session`).
        bronze_table_names: bronze tables to read (default: all under ``<lakehouse>/bronze``).
        await_termination: wait for the queries (available-now: until drained, one query
            after the other; processing-time: until stopped). With False, available-now
            queries are still started together and returned running.
        resolver: a schema resolver to use (default: :func:`open_resolver`).

    Raises:
        pyspark.errors.StreamingQueryException: a batch failed (e.g. the registry is down).
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

    install_metrics(spark, cfg)
    # One driver writes silver, quarantine and quality results of an object-store lakehouse
    # (lakehouse.lease); a lease of queries left running is renewed until this process ends.
    lease = take_writer_lease(spark, cfg.lakehouse_path, JOB)
    try:
        return _start_queries(spark, cfg, trigger, resolver, bronze_table_names, await_termination)
    finally:
        if lease is not None and await_termination:
            lease.release()


def _start_queries(
    spark: SparkSession,
    cfg: ProtolakeConfig,
    trigger: str,
    resolver: SchemaResolver,
    bronze_table_names: Sequence[str] | None,
    await_termination: bool,
) -> SilverRun:
    """Start silver's queries (one per bronze table) and, if asked, wait for them."""
    checker = make_checker(spark, cfg)
    if checker is not None:
        prune_quality_results(spark, cfg)
    if cfg.silver.catalog_database:
        # the catalog of this session may be new (in-memory, or another metastore): make every
        # existing table selectable by name, not only those this run writes to
        register_tables(spark, cfg.lakehouse_path, cfg.silver.catalog_database)
    out = SilverRun()
    paths = bronze_tables(cfg.lakehouse_path, spark, bronze_table_names)
    if not paths:
        log.warning("silver: no bronze table under %s yet", Layout(cfg.lakehouse_path).bronze)
        return out
    sequential = trigger == "available-now" and await_termination
    for path in paths:
        query, batch = start_query(spark, cfg, path, trigger, resolver, checker)
        out.queries.append(query)
        out.batches.append(batch)
        if sequential:
            await_queries([query])
    if await_termination and not sequential:
        await_queries(out.queries)
    if checker is not None and await_termination:
        checker.build_data_docs()
    return out


def summarize(result: SilverRun, cfg: ProtolakeConfig) -> dict[str, Any]:
    """Records, silver rows per table and quarantined rows per reason over a run."""
    silver: dict[str, int] = defaultdict(int)
    quarantined: dict[str, int] = defaultdict(int)
    records = batches = 0
    for b in result.batches:
        for s in b.history:
            batches += 1
            records += s.records
            for k, v in s.quarantined.items():
                quarantined[k] += v
            for k in s.silver:
                silver[k] += 0
    return {
        "job": JOB,
        "batches": batches,
        "records": records,
        "quarantined": dict(sorted(quarantined.items())),
        "tables": sorted(silver),
        "silver_root": Layout(cfg.lakehouse_path).silver,
    }
