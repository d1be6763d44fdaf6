"""Bronze's routing: which topics a micro-batch holds, and each topic's rows to its table
(:class:`TopicRouter`, the ``foreachBatch`` function of bronze in either table mode: a table per
topic, or one table for every topic).

Contract: every append is idempotent (its commit names the app id and batch id, via
:func:`lakehouse.delta.append_idempotent`), so a batch replayed after a crash is skipped by
each table that already has it; rows of a topic outside the batch's offset ranges fail the
batch instead of landing in a wrong table. See :mod:`pipelines.bronze` for the job.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the idiom every Spark reader knows

from lakehouse.checkpoints import planned_source_offset, read_text_lines
from lakehouse.delta import ANY_BATCH_MAY_BE_REPLAYED, Replays, append_idempotent
from lakehouse.driver_append import append_arrow, appends_in_driver, collect_arrow, has_table
from lakehouse.layout import Layout
from lakehouse.streaming import run_together
from pipelines.naming import bronze_table_of_topic

log = logging.getLogger("pipelines.bronze")


def parse_kafka_offsets(text: str) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset JSON (``{"topic": {"partition": offset}}``).

    Raises:
        ValueError: not that shape.
    """
    value = json.loads(text)
    if not isinstance(value, dict) or not all(
        isinstance(parts, dict) and all(isinstance(o, int) for o in parts.values())
        for parts in value.values()
    ):
        raise ValueError(f"not Kafka source offsets: {text[:200]!r}")
    return {str(t): {str(p): int(o) for p, o in parts.items()} for t, parts in value.items()}


@dataclass(frozen=True)
class BatchOffsets:
    """Where a micro-batch starts and ends in each topic's partitions (Spark's offset log)."""

    start: dict[str, dict[str, int]]
    end: dict[str, dict[str, int]]

    @property
    def topics(self) -> set[str]:
        """Topics one of whose partitions moved or is new: maybe a topic without records
        (transaction markers), never one missed."""
        return {
            topic
            for topic, parts in self.end.items()
            if any(self.start.get(topic, {}).get(p) != offset for p, offset in parts.items())
        }

    @property
    def most_records(self) -> int:
        """The batch's records at most: the offsets it spans (a new partition's from 0)."""
        return sum(
            max(0, offset - self.start.get(topic, {}).get(p, 0))
            for topic, parts in self.end.items()
            for p, offset in parts.items()
        )


def batch_offsets(spark: SparkSession, checkpoint: str, batch_id: int) -> BatchOffsets | None:
    """The offsets micro-batch ``batch_id`` covers, read from Spark's offset log.

    Spark writes ``offsets/<id>`` (the batch's end offsets) before running the batch; the
    start is the previous batch's end, or the initial offsets (``sources/0/0``) for batch 0.
    None when the log cannot be read in the expected format.
    """
    root = checkpoint.rstrip("/")
    try:
        end_offset = planned_source_offset(spark, root, batch_id)
        if end_offset is None:
            return None
        end = parse_kafka_offsets(end_offset)
        if batch_id == 0:
            initial = read_text_lines(spark, Layout.initial_offsets(root))
            start = parse_kafka_offsets(initial[-1]) if initial else {}
        else:
            start_offset = planned_source_offset(spark, root, batch_id - 1)
            if start_offset is None:
                return None
            start = parse_kafka_offsets(start_offset)
    except ValueError as exc:
        log.warning("bronze: offset log of batch %d not understood (%s)", batch_id, exc)
        return None
    return BatchOffsets(start, end)


def topics_in_batch(spark: SparkSession, checkpoint: str, batch_id: int) -> set[str] | None:
    """Topics whose offsets micro-batch ``batch_id`` covers (:attr:`BatchOffsets.topics`), or
    None when the offset log cannot tell (then the caller lists the batch's topics itself)."""
    offsets = batch_offsets(spark, checkpoint, batch_id)
    return None if offsets is None else offsets.topics


@dataclass(frozen=True)
class TopicRouter:
    """Bronze's ``foreachBatch`` function: each topic's rows to its table (``table_of``: its
    own by default, or one table for every topic).

    Which topics a batch holds comes, without touching the data, from Spark's offset log in
    ``checkpoint`` (:func:`topics_in_batch`): rows of any other topic then fail the batch
    instead of landing in a wrong table. The log is read first even for one static topic
    (``known_topic``, taken only when the log cannot tell): a batch planned before the
    configuration's topics changed runs again with the topics it was planned with. One
    table: the batch is written as is, in one pass over Kafka's data. Several: the batch is
    kept on local disk (bounded memory, one read from Kafka) and each table gets one filtered
    append, all tables at once (:meth:`_append_all`). When the offset log cannot tell, the
    topics are listed from the kept batch.
    """

    table_path: Callable[[str], str]  # a bronze table's path, by table name
    app_id: str
    partition_by: tuple[str, ...]
    known_topic: str | None = None
    checkpoint: str | None = None
    on_batch: Callable[[int, list[str]], None] | None = None  # (batch id, tables appended to)
    # the tables a batch appended to, each with its topics in the batch (after the appends)
    on_tables: Callable[[dict[str, list[str]]], None] | None = None
    # which batches an earlier run may have written (read from the checkpoint at start)
    replays: Replays = ANY_BATCH_MAY_BE_REPLAYED
    # a topic's table name
    table_of: Callable[[str], str] = bronze_table_of_topic

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        offsets = None
        if self.checkpoint is not None:
            offsets = batch_offsets(batch.sparkSession, self.checkpoint, batch_id)
        # the offset log first: a batch planned before the configuration's topics changed is
        # run again with the topics it was planned with
        topics: set[str] | None = None if offsets is None else offsets.topics
        rows = batch if topics is None else _only_topics(batch, topics)
        if topics is None and self.known_topic is not None:
            topics = {self.known_topic}
        known = None if topics is None else _tables_of(topics, self.table_of)
        if known is not None and offsets is not None:
            if self._in_driver(known, offsets) and self._append_collected(rows, known, batch_id):
                self._done(batch_id, known)
                return
        if known is not None and len(known) <= 1:
            for table in known:
                self._append(rows, table, batch_id)
            self._done(batch_id, known)
            return
        # As many parts as the cluster has cores, not one per Kafka partition: each table's
        # append then runs that many tasks and writes at most that many files per batch.
        cores = max(1, batch.sparkSession.sparkContext.defaultParallelism)
        kept = rows.coalesce(cores).persist(StorageLevel.DISK_ONLY)
        try:
            if topics is None:
                topics = {r.topic for r in kept.select("topic").distinct().collect()}
            tables = _tables_of(topics, self.table_of)
            if len(tables) > 1:
                kept.count()  # one read from Kafka, before the appends read the kept rows
            # One append per table, even when several topics share it: a second append with
            # the same (app id, batch id) would be skipped as a duplicate in a replay.
            self._append_all(
                [
                    (table, kept if len(tables) == 1 else kept.where(_topic_in(members)))
                    for table, members in tables.items()
                ],
                batch_id,
            )
            self._done(batch_id, tables)
        finally:
            kept.unpersist()

    def _append_all(self, parts: list[tuple[str, DataFrame]], batch_id: int) -> None:
        """Append to each table, the tables at the same time (:func:`run_together`: their
        commits overlap). Every append is idempotent, so a batch that fails part-way is
        replayed and the tables that have it skip it."""
        run_together([partial(self._append, rows, table, batch_id) for table, rows in parts])

    def _in_driver(self, tables: dict[str, list[str]], offsets: BatchOffsets) -> bool:
        """Whether the batch goes through the driver: small, and every table local and there
        (a new table is created by Spark's append, in the kept-copy path)."""
        paths = [self.table_path(table) for table in tables]
        return bool(paths) and all(
            appends_in_driver(path, offsets.most_records) and has_table(path) for path in paths
        )

    def _append_collected(
        self, rows: DataFrame, tables: dict[str, list[str]], batch_id: int
    ) -> bool:
        """A small batch of local tables: read from Kafka once into the driver (Arrow), each
        table's rows appended by delta-rs (``lakehouse.driver_append``), the tables at the
        same time. Rows delta-rs does not take (a table whose schema differs) are appended by
        Spark from the collected rows: Kafka is read once either way. False, with nothing
        written, when the rows could not be collected (more bytes than the driver takes,
        ``spark.driver.maxResultSize``): the caller appends them with Spark."""
        collected = collect_arrow(rows, "bronze")
        if collected is None:
            return False

        def append(table: str, members: list[str]) -> None:
            mine = collected
            if len(tables) > 1:
                mine = collected.filter(pc.is_in(collected["topic"], pa.array(members)))
            path = self.table_path(table)
            spark = rows.sparkSession
            landed = append_arrow(
                spark, mine, path, self.app_id, batch_id, replays=self.replays, logger=log
            )
            if not landed:
                self._append(spark.createDataFrame(mine, schema=rows.schema), table, batch_id)

        run_together([partial(append, table, members) for table, members in tables.items()])
        return True

    def _done(self, batch_id: int, tables: dict[str, list[str]]) -> None:
        log.debug("bronze: batch %d -> %s", batch_id, ", ".join(tables) or "-")
        if self.on_batch is not None:
            self.on_batch(batch_id, list(tables))
        if self.on_tables is not None and tables:
            self.on_tables(tables)

    def _append(self, rows: DataFrame, table: str, batch_id: int) -> None:
        append_idempotent(
            rows,
            self.table_path(table),
            self.app_id,
            batch_id,
            replays=self.replays,
            partition_by=self.partition_by,
            logger=log,
        )


def one_table(name: str) -> Callable[[str], str]:
    """``TopicRouter.table_of`` of bronze's single table ``name``: every topic's."""
    return lambda _topic: name


def _tables_of(topics: set[str], table_of: Callable[[str], str]) -> dict[str, list[str]]:
    tables: dict[str, list[str]] = {}
    for topic in sorted(topics):
        tables.setdefault(table_of(topic), []).append(topic)
    return dict(sorted(tables.items()))


def _only_topics(df: DataFrame, topics: set[str]) -> DataFrame:
    # A guard, evaluated row by row inside the write itself (no extra pass): a record of a
    # topic outside the offset ranges would mean the offset log was misread.
    allowed = sorted(topics)
    message = F.concat(
        F.lit("bronze: a record of topic "),
        F.col("topic"),
        F.lit(f" is outside this batch's offset ranges {allowed}"),
    )
    return df.withColumn(
        "topic", F.when(_topic_in(allowed), F.col("topic")).otherwise(F.raise_error(message))
    )


def _topic_in(topics: Sequence[str]) -> Column:
    return F.col("topic").isin(list(topics))
