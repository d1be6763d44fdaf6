"""The bookkeeping of ``protolake replay`` in the quarantine table: which records a replay
selects, which of them silver already holds, the write id of the rest, and how each quarantine
row is marked afterwards. The job that re-decodes them is ``pipelines.ops.replay``.

Selection (:func:`select_pending`): quarantine rows not yet replayed (``replay_outcome`` null or
a failure reason), whose current reason (the last replay's failure reason, else
``reason_code``), topic, schema id and Kafka timestamp (``since`` inclusive, ``until``
exclusive) match a :class:`ReplayFilter`, one row per record key, read at one pinned Delta
version so that the selection does not move while a replay runs.

Marks (:func:`mark_outcomes`), from what silver holds afterwards (read, not assumed):

- ``replay_outcome = "replayed"``, ``replayed_at = now`` for a record now in a silver table;
- ``replay_outcome = <new reason code>``, ``replayed_at = now`` for one that still fails (the
  row stays quarantined; ``reason_code`` keeps the original reason);
- unchanged otherwise. Raw bytes are never deleted.

Exactly once, whatever happens between two runs: the selected records that a silver table
already holds (by ``RECORD_KEY``, the key of the invariant) are set aside before writing
(:func:`records_to_write`): an earlier replay wrote them and died before marking them. They
are marked ``replayed`` with the others and never written again, even when the selection has
changed since. The rest is written with the ids of :func:`selection_id` (``txnAppId =
"replay-<hash of their keys and of the silver versions checked>"``), so two runs that checked
the same silver state and write the same records commit them once; any commit since (an
interrupted replay's included) gives a new id, so Delta never skips a write whose records are
not in silver yet.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lakehouse.delta import retry_conflicts
from lakehouse.layout import Layout
from lakehouse.tables import silver_versions
from pipelines.ops.common import effective_reason
from pipelines.quarantine import RECORD_KEY, REPLAYED, still_quarantined

log = logging.getLogger("pipelines.ops.replay")

# The columns of the still-failing records a replay hands to :func:`mark_outcomes`.
FAILURES_SCHEMA = (
    "_kafka_topic string, _kafka_partition int, _kafka_offset long, reason_code string"
)


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


@dataclass(frozen=True)
class ToWrite:
    """The selected records silver does not hold yet (persisted), and the ids to write them."""

    rows: Any
    count: int
    app_id: str
    batch_id: int


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


def records_to_write(spark: Any, root: str, pending: Any) -> ToWrite:
    """``pending`` without the records silver already holds, with their write ids.

    The rows are persisted: the caller unpersists ``ToWrite.rows``.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F  # noqa: N812

    versions = tuple(sorted(silver_versions(Layout(root), spark).items()))
    done = keys_in_silver(spark, versions, pending)
    rows = pending.join(done, list(RECORD_KEY), "left_anti").persist(StorageLevel.MEMORY_AND_DISK)
    try:
        stats = rows.agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.xxhash64(*RECORD_KEY).cast("decimal(38,0)")).alias("h"),
        ).first()
    except BaseException:
        rows.unpersist()
        raise
    count = int(stats["n"])
    app_id, batch_id = selection_id(count, int(stats["h"] or 0), versions) if count else ("", 0)
    return ToWrite(rows, count, app_id, batch_id)


def no_failures(spark: Any) -> Any:
    """An empty (persisted) frame of still-failing records."""
    return spark.createDataFrame([], FAILURES_SCHEMA).persist()


def mark_outcomes(spark: Any, root: str, pending: Any, failures: Any) -> dict[str | None, int]:
    """Set replayed_at/replay_outcome on the selected rows from what silver now holds.

    Returns the records of each outcome: ``REPLAYED``, a new reason code, or None (unchanged).
    """
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
    counts = {
        row["_outcome"]: int(row["count"]) for row in outcomes.groupBy("_outcome").count().collect()
    }
    source = outcomes.filter(F.col("_outcome").isNotNull()).withColumn(
        "_replayed_at", F.lit(datetime.now(UTC)).cast("timestamp")
    )
    merge_outcomes(spark, Layout(root).quarantine, source)
    return counts


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
