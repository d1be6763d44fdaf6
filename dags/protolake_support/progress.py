"""What the streaming checkpoints of the continuous jobs say, read without Spark: the last
batch planned and committed and its age (:func:`read_checkpoint`), how far each query is
behind its source (:func:`bronze_lag`: Kafka offsets; :func:`silver_lag`: bronze Delta
versions), and the verdict on a job from its process and its queries (:func:`judge_stream`).

A checkpoint is a Structured Streaming checkpoint folder (``offsets/<n>``, ``commits/<n>``);
its location is :meth:`lakehouse.layout.Layout.checkpoint`, where the jobs write it, and it is
read through the lakehouse's :class:`lakehouse.store.Store` (a local folder or ``s3a://``).
:func:`pending_work` says, from the same reading, whether an available-now run of a job would
find anything to do (the ingest DAG submits none when it would not).
``confluent_kafka``, ``lakehouse`` and ``deltalake`` are imported inside the functions.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from protolake_support.environment import kafka_client_options, load_job_config, open_lakehouse
from protolake_support.tables import delta_tables, delta_version

if TYPE_CHECKING:
    from lakehouse.layout import Layout
    from lakehouse.store import Store, StoredFile

log = logging.getLogger(__name__)


@dataclass
class CheckpointProgress:
    """What a streaming checkpoint says: the last batch planned and committed, and when."""

    checkpoint: str
    last_offsets_batch: int | None = None
    last_commit_batch: int | None = None
    last_commit_age_seconds: float | None = None
    offsets: dict[str, Any] | None = None  # the source offsets of the last planned batch

    @property
    def in_flight(self) -> bool:
        """A batch was planned and not committed (running now, or died mid-batch)."""
        return self.last_offsets_batch is not None and self.last_offsets_batch != (
            self.last_commit_batch
        )


def read_checkpoint(checkpoint: str, store: Store, now: float | None = None) -> CheckpointProgress:
    """Read ``offsets/<n>`` and ``commits/<n>`` of a Structured Streaming checkpoint.

    The offset log's file holds a version line, a metadata JSON line, then one JSON line per
    source (Spark's ``OffsetSeqLog``). The last commit's age comes from its file's
    modification time (on an object store: the object's ``Last-Modified``).
    """
    from lakehouse.layout import Layout

    out = CheckpointProgress(checkpoint)
    offsets = _numbered(store, Layout.offset_log(checkpoint))
    commits = _numbered(store, Layout.commit_log(checkpoint))
    if offsets:
        out.last_offsets_batch = offsets[-1][0]
        lines = store.read_text(offsets[-1][1].path).splitlines()
        sources = [json.loads(x) for x in lines[2:] if x.strip() and x.strip() != "-"]
        out.offsets = {"sources": sources}
    if commits:
        out.last_commit_batch = commits[-1][0]
        mtime = commits[-1][1].mtime
        if mtime is not None:
            out.last_commit_age_seconds = (now or time.time()) - mtime
    return out


def _numbered(store: Store, folder: str) -> list[tuple[int, StoredFile]]:
    """The files of ``folder`` named by a batch number, by number (without a JVM: the jobs
    list the same logs through Spark's file systems, ``lakehouse.checkpoints.newest_batch``)."""
    return sorted((int(f.name), f) for f in store.files(folder) if f.name.isdigit())


class LagUnknownError(ValueError):
    """Kafka's offsets do not continue the checkpoint's (a topic or its records are gone)."""


def bronze_lag(
    progress: CheckpointProgress,
    bootstrap: str,
    options: Mapping[str, str],
    subscribed: Callable[[Iterable[str]], Iterable[str]] | None = None,
) -> int:
    """Records in Kafka beyond the bronze checkpoint's last planned offsets.

    The topics measured are the job's subscription when ``subscribed`` is given (the
    cluster's topic names -> the ones bronze reads: ``subscribed_topics`` of the job's
    configuration), so that a topic the stream has not read yet counts too; else the
    checkpoint's. Partitions the checkpoint does not know yet count from their start offset.

    Raises:
        LagUnknownError: a topic of the checkpoint is gone, a topic's metadata has an error
            (no leader yet, not authorized), or a partition ends before the checkpoint's
            offset (recreated, truncated): Spark decides what that means
            (``failOnDataLoss``), no lag says it.
    """
    from confluent_kafka import Consumer

    from pipelines.settings.clients import partition_watermarks

    planned: dict[tuple[str, int], int] = {}
    for source in (progress.offsets or {}).get("sources", []):
        for topic, parts in source.items():
            for part, offset in parts.items():
                planned[(topic, int(part))] = int(offset)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "protolake-health", **options})
    try:
        meta = consumer.list_topics(timeout=10)
        read = {t for t, _ in planned}
        # a topic of the checkpoint that is gone still matches the subscription's pattern
        topics = set(subscribed(set(meta.topics) | read)) if subscribed else read
        for topic in sorted(topics):
            info = meta.topics.get(topic)
            if info is None and topic not in read:
                continue  # a subscribed topic that does not exist yet
            if info is None or info.error is not None:
                raise LagUnknownError(f"topic {topic} is not readable")
        lag = 0
        for (topic, part), (low, high) in partition_watermarks(consumer, meta, topics).items():
            start = planned.get((topic, part), low)
            if high < start:
                raise LagUnknownError(f"{topic}[{part}] ends at {high}, before {start}")
            lag += high - max(low, start)
        return lag
    finally:
        consumer.close()


def silver_lag(progress: CheckpointProgress, bronze_table: str, store: Store) -> int | None:
    """Delta versions of a bronze table beyond the silver checkpoint's last planned version."""
    latest = delta_version(bronze_table, store)
    if latest is None:
        return None
    sources = (progress.offsets or {}).get("sources", [])
    if not sources:
        return latest + 1
    # Delta's source offset: with index -1, version reservoirVersion is the next one to read
    # (a version read to its last file is saved so); with an index, that version was read
    # in part (a first read of a large table, or a rate limit): it still counts as unread.
    unread_from = int(sources[0].get("reservoirVersion", -1))
    if latest < unread_from - 1:
        return None  # the table is behind what silver read: recreated, Spark will say
    return latest - unread_from + 1


Part = tuple[str, CheckpointProgress | None, int | None]  # query name, progress, lag


@dataclass
class StreamHealth:
    """The verdict on one continuous job (see :func:`judge_stream`)."""

    job: str
    pid: int | None
    verdict: str  # "healthy" | "dead" | "stale"
    reason: str
    lag: int | None = None
    last_commit_age_seconds: float | None = None


def judge_stream(
    job: str,
    pid: int | None,
    parts: Sequence[Part],
    stale_after_seconds: float,
    running_seconds: float | None = None,
) -> StreamHealth:
    """Healthy, dead or stale, from the process and its checkpoints' progress.

    ``parts`` holds one ``(name, checkpoint progress or None, lag or None)`` per query of the
    job (bronze: one; silver: one per bronze table). ``running_seconds``: how long the process
    has been up.

    - dead: no live process (no pid file, or the pid is gone or is another program);
    - stale: alive for more than ``stale_after_seconds``, and some query has work waiting
      (lag > 0) but committed no batch for ``stale_after_seconds`` (a stuck driver, a hung
      source, or a bronze table that appeared after the silver stream started and that it
      therefore does not read). An idle query with no lag commits nothing and is healthy
      however old its last batch is. An unknown lag (not measurable) never makes it stale;
    - healthy otherwise.
    """
    lags = [lag for _, _, lag in parts if lag is not None]
    total_lag = sum(lags) if lags else None
    ages = [p.last_commit_age_seconds for _, p, _ in parts if p and p.last_commit_age_seconds]
    newest = min(ages) if ages else None
    if pid is None:
        return StreamHealth(job, None, "dead", "no live process", total_lag, newest)
    young = running_seconds is not None and running_seconds < stale_after_seconds
    if not young:
        for name, progress, lag in parts:
            if not lag:
                continue
            age = progress.last_commit_age_seconds if progress else None
            if age is None or age > stale_after_seconds:
                when = "never" if age is None else f"{age:.0f} s ago"
                return StreamHealth(
                    job, pid, "stale", f"{name}: lag {lag}, last batch {when}", total_lag, newest
                )
    return StreamHealth(job, pid, "healthy", f"lag {total_lag}", total_lag, newest)


def stream_parts(job: str, config: str) -> list[Part]:
    """The queries of a continuous job, each with its checkpoint's progress and its lag.

    Checkpoints are where the jobs keep them, ``Layout.checkpoint(job, name)`` (bronze: one
    query named after its table mode; silver: one per bronze table). A lag that cannot be
    measured (Kafka unreachable with the available options) is None, logged. A lakehouse on a
    file system the DAGs cannot read, or an object store that refuses or does not answer (its
    one-line reason logged): no parts, the verdict then rests on the process alone (a health
    probe must not keep a dead stream from being started again).
    """
    from pipelines.settings.preflight import StoreError

    cfg = load_job_config(config)
    try:
        lakehouse = open_lakehouse(cfg)
    except StoreError as exc:
        log.warning("%s stream: checkpoints not readable: %s", job, exc)
        return []
    if lakehouse is None:
        return []
    layout, store = lakehouse
    try:
        if job == "bronze":
            return [_bronze_part(cfg, layout, store)]
        return _silver_parts(layout, store)
    except Exception as exc:  # noqa: BLE001 - the store failed after its check: same verdict
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        log.warning("%s stream: checkpoints not readable: %s", job, store.scrub(reason))
        return []


def _silver_parts(layout: Layout, store: Store) -> list[Part]:
    parts: list[Part] = []
    for name, table in delta_tables(layout.bronze, store).items():
        checkpoint = layout.checkpoint("silver", name)
        progress = read_checkpoint(checkpoint, store) if store.is_dir(checkpoint) else None
        if progress is None:
            version = delta_version(table, store)
            parts.append((name, None, None if version is None else version + 1))
        else:
            parts.append((name, progress, silver_lag(progress, table, store)))
    return parts


def _bronze_part(cfg: Any, layout: Layout, store: Store) -> Part:
    from pipelines.naming import bronze_query_name
    from pipelines.settings.clients import subscribed_topics

    name = bronze_query_name(cfg.bronze.table_mode, cfg.bronze.single_table)
    checkpoint = layout.checkpoint("bronze", name)
    progress = read_checkpoint(checkpoint, store) if store.is_dir(checkpoint) else None
    lag: int | None = None
    if progress is not None:
        try:
            lag = bronze_lag(
                progress,
                cfg.kafka.bootstrap_servers,
                kafka_client_options(cfg),
                partial(subscribed_topics, cfg),
            )
        except LagUnknownError as exc:
            log.warning("bronze lag not measurable: %s", exc)
        except Exception as exc:  # a health probe must not fail the check
            log.warning("bronze lag not measurable: %s", type(exc).__name__)
    return (name, progress, lag)


def pending_work(parts: Sequence[Part]) -> str | None:
    """Why an available-now run of the job whose queries are ``parts`` has work, or None
    when it has none: every query ran before, has no batch in flight, and is 0 behind.

    Anything not known for sure counts as work: no parts (checkpoints not readable; for
    silver, no bronze table yet), a query that never ran, a batch planned and not committed
    (a run that died mid-batch: the next one finishes it), a lag that was not measurable.
    """
    if not parts:
        return "no query found (no checkpoint readable; for silver, no bronze table)"
    for name, progress, lag in parts:
        if progress is None:
            return f"{name}: never ran"
        if progress.in_flight:
            return f"{name}: batch {progress.last_offsets_batch} not committed"
        if lag is None:
            return f"{name}: lag not measurable"
        if lag > 0:
            return f"{name}: {lag} behind"
    return None
