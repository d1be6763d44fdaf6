"""Delta commits of the lakehouse: idempotent appends, conflict retries, the tables' defaults.

- :func:`append_idempotent` appends a micro-batch with its (app id, batch id) in the
  commit's ``userMetadata``; a batch an earlier run may have written (:class:`Replays`: only
  the first of a restarted query) is first looked up in the table's history
  (:func:`batch_landed`) and skipped when there, so a replayed micro-batch never duplicates.
  Looking costs a read of the newest commits, and only a replay pays it (Delta's
  ``txnAppId``/``txnVersion`` alone would reconstruct the table's state on every append).
- :func:`retry_conflicts` runs an idempotent commit again when it lost a race with a
  concurrent commit (:func:`is_delta_conflict`), with a jittered backoff; any other error, and
  the last attempt's, is raised as it came.
- :func:`use_table_defaults` gives the tables a session creates a checkpoint every
  :data:`CHECKPOINT_INTERVAL` commits rather than Delta's 10 (the function says why).
- finding and reading tables (whether a path holds one, listing, versions) is
  ``lakehouse.tables``.

pyspark and delta-spark are imported by the functions that use them, never at import time:
a caller without Spark imports this module too.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse.tables import is_delta_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

# Delta's exceptions for a commit that lost a race with a concurrent one; the write is retried.
RETRYABLE_CONFLICTS = (
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "CommitFailedError",  # delta-rs (deltalake): its commit lost a race with another writer
)
# The same races as Delta's error conditions (what pyspark shows once delta.exceptions has
# converted the Java exception: its text then names the condition, not the class).
RETRYABLE_CONDITIONS = (
    "DELTA_CONCURRENT_APPEND",
    "DELTA_CONCURRENT_DELETE_READ",
    "DELTA_CONCURRENT_DELETE_DELETE",
    "DELTA_CONCURRENT_TRANSACTION",
    "DELTA_METADATA_CHANGED",
    "DELTA_PROTOCOL_CHANGED",
)
WRITE_ATTEMPTS = 10
APPEND_ATTEMPTS = 5
CHECKPOINT_INTERVAL = 100  # commits between checkpoints of the tables the jobs create
CHECKPOINT_INTERVAL_DEFAULT = "spark.databricks.delta.properties.defaults.checkpointInterval"
BATCH_MARKER = "protolake.batch"  # the key of a micro-batch's commit in its userMetadata
HISTORY_PAGE = 32  # commits read per look into a table's history, then four times as many
CLOCK_MARGIN_MS = 15 * 60 * 1000  # clocks of the commits and of the batch's plan may differ


# -- commits -------------------------------------------------------------------------------


def use_table_defaults(spark: SparkSession) -> None:
    """Let the Delta tables ``spark`` creates checkpoint every :data:`CHECKPOINT_INTERVAL`
    commits (their ``delta.checkpointInterval``), unless the session's settings name an
    interval themselves (``spark-defaults.conf``, ``--conf``, ``[spark.conf]``).

    A stream commits to each of its tables every micro-batch, and every ``checkpointInterval``
    commits Delta rebuilds the table's whole state from its log and writes it as Parquet, in
    Spark jobs of the committing batch. With Delta's default of 10, checkpoints are about a
    third of what small appends cost; with 100, the appends take 0.64x the time, and a cold
    read just before a checkpoint, which reads up to 99 commit files, 0.98x (Spark) and 1.33x
    (delta-rs: 0.13 s against 0.09 s) (``bench/checkpoint_interval_bench.py``, local folder).
    Tables that exist keep their interval: ``ALTER TABLE ... SET TBLPROPERTIES
    ('delta.checkpointInterval' = ...)``. The local tables ``lakehouse.driver_tables``
    creates take the session's defaults too; the quality results of a local lakehouse, which
    delta-rs creates with its first rows, have delta-rs's own default.
    """
    if spark.conf.get(CHECKPOINT_INTERVAL_DEFAULT, None) is None:
        spark.conf.set(CHECKPOINT_INTERVAL_DEFAULT, str(CHECKPOINT_INTERVAL))


def is_delta_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is a Delta commit that lost a race with a concurrent commit.

    Recognised by class (the Python classes of ``delta.exceptions``, which have the Java
    names, and delta-rs' ``CommitFailedError``), by Delta's error condition, or by the Java
    class named in a Py4J error's text.
    """
    if any(cls.__name__ in RETRYABLE_CONFLICTS for cls in type(exc).__mro__):
        return True
    condition = getattr(exc, "getCondition", None)
    try:
        named = condition() if callable(condition) else None
    except Exception:  # noqa: BLE001 - a condition we cannot read is not one we retry on
        named = None
    text = f"{named or ''} {exc}"
    return any(name in text for name in RETRYABLE_CONFLICTS + RETRYABLE_CONDITIONS)


def retry_conflicts(
    commit: Callable[[], None],
    what: str,
    attempts: int = WRITE_ATTEMPTS,
    *,
    logger: logging.Logger | None = None,
) -> None:
    """Run an idempotent Delta commit, again after a conflict with a concurrent commit.

    Args:
        commit: the commit; running it twice must leave the table as running it once (a
            conflict is read from the error's text, which could also come after a commit
            that landed).
        what: what is committed, for the log.
        attempts: at most this many runs.
        logger: where retries are logged (default: this module's).

    Raises:
        Exception: the commit's own error when it is no conflict, or on the last attempt.
    """
    for attempt in range(1, attempts + 1):
        try:
            commit()
            return
        except Exception as exc:
            if attempt == attempts or not is_delta_conflict(exc):
                raise
            (logger or log).warning(
                "concurrent Delta commit, retrying %s (%d/%d)",
                what,
                attempt,
                attempts,
            )
            # jittered, so that writers that collided do not collide again in lockstep
            time.sleep(random.uniform(0.1, min(4.0, 0.25 * 2**attempt)))


@dataclass(frozen=True)
class Replays:
    """Which micro-batches of a query an earlier run may have written already.

    Spark runs a batch again after a restart only when an earlier run planned it
    (``offsets/<id>`` in the checkpoint) and did not commit it (no ``commits/<id>``): the
    first batch of the new run, at most. Every later batch is planned by this run, and no
    one has written it. :func:`lakehouse.checkpoints.replays_of` reads this from a checkpoint.

    Args:
        fresh_from: batch ids from this one on are planned by this run; None: any batch may
            be a replay (a caller that read no checkpoint: the safe default).
        planned_ms: when the replayed batch was planned (epoch ms, the driver's clock): its
            commits cannot be older, which bounds the look into a table's history.
    """

    fresh_from: int | None = None
    planned_ms: int | None = None

    def may_be_written(self, batch_id: int) -> bool:
        """Whether an earlier run may have appended batch ``batch_id`` already."""
        return self.fresh_from is None or batch_id < self.fresh_from


# the default of callers that read no checkpoint: any batch may be a replay, so each is looked up
ANY_BATCH_MAY_BE_REPLAYED = Replays()


def batch_marker(app_id: str, batch_id: int) -> str:
    """The ``userMetadata`` of a micro-batch's commit: which stream (app id) and batch."""
    return json.dumps({BATCH_MARKER: {"app": app_id, "batch": int(batch_id)}})


def read_batch_marker(user_metadata: str | None) -> tuple[str, int] | None:
    """(app id, batch id) of a commit's ``userMetadata`` written by :func:`batch_marker`."""
    if not user_metadata:
        return None
    try:
        marker = json.loads(user_metadata)[BATCH_MARKER]
        return str(marker["app"]), int(marker["batch"])
    except (ValueError, TypeError, KeyError):
        return None


def append_idempotent(
    df: DataFrame,
    path: str,
    app_id: str,
    batch_id: int,
    *,
    replays: Replays = ANY_BATCH_MAY_BE_REPLAYED,
    partition_by: Sequence[str] = (),
    merge_schema: bool = False,
    attempts: int = APPEND_ATTEMPTS,
    logger: logging.Logger | None = None,
) -> None:
    """Append ``df`` to the Delta table at ``path`` unless it already has (app_id, batch_id).

    Every commit carries its (app id, batch id) in its ``userMetadata``
    (:func:`batch_marker`). A batch that ``replays`` says no earlier run wrote is appended
    as it is: no look at the table's state. A batch that may be a replay is first looked up
    in the table's history (:func:`batch_landed`) and skipped when it is there; its append
    also carries Delta's ``txnAppId``/``txnVersion`` (Delta then refuses a concurrent
    writer of the same batch, and skips a batch recorded with those ids alone).

    A commit that lost a race with a concurrent one is run again; a blind append is looked
    up first then (an error read as a conflict could come after the commit landed).

    Args:
        replays: which batches may be replays (default: any).
        partition_by: the table's partition columns (used when the append creates it).
        merge_schema: let the append add the frame's new columns to the table.
        attempts: runs of the commit when a concurrent one conflicts.
        logger: where retries and skipped batches are logged.
    """

    def write(checked: bool) -> None:
        writer = (
            df.write.format("delta")
            .mode("append")
            .option("userMetadata", batch_marker(app_id, batch_id))
        )
        if checked:
            writer = writer.option("txnAppId", app_id).option("txnVersion", batch_id)
        if merge_schema:
            writer = writer.option("mergeSchema", "true")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.save(path)

    commit_once(df.sparkSession, path, app_id, batch_id, write, replays, attempts, logger)


def commit_once(
    spark: SparkSession,
    path: str,
    app_id: str,
    batch_id: int,
    write: Callable[[bool], None],
    replays: Replays = ANY_BATCH_MAY_BE_REPLAYED,
    attempts: int = APPEND_ATTEMPTS,
    logger: logging.Logger | None = None,
) -> None:
    """Run ``write(checked)``, the commit of batch ``batch_id`` of ``app_id`` to the table at
    ``path``, unless the table has it already: the lookup, retries and logging of
    :func:`append_idempotent`, for any writer (``lakehouse.driver_append`` commits with
    delta-rs). ``checked`` tells the writer that the batch may be a replay, and that its
    commit should carry Delta's transaction ids.
    """
    checked = replays.may_be_written(batch_id)
    if checked and batch_landed(spark, path, app_id, batch_id, replays.planned_ms):
        (logger or log).info("%s has batch %d of %s already; skipped", path, batch_id, app_id)
        return
    started_ms = int(time.time() * 1000)
    runs = 0

    def commit() -> None:
        nonlocal runs
        runs += 1
        # Delta's transaction ids make a checked append's retry a no-op by themselves
        if runs > 1 and not checked and _retry_landed(spark, path, app_id, batch_id, started_ms):
            (logger or log).info(
                "%s has batch %d of %s after all; not retried", path, batch_id, app_id
            )
            return
        write(checked)

    retry_conflicts(commit, f"the append to {path}", attempts, logger=logger)


def _retry_landed(spark: SparkSession, path: str, app_id: str, batch_id: int, since: int) -> bool:
    """Whether a blind append that seemed to fail landed after all (attempted since ``since``)."""
    try:
        return batch_landed(spark, path, app_id, batch_id, since)
    except HistoryCleanedError:
        return False  # every commit left is newer than the attempt, and none is this batch's


class HistoryCleanedError(RuntimeError):
    """A table's history no longer reaches back far enough to tell whether a batch landed."""


def batch_landed(
    spark: SparkSession,
    path: str,
    app_id: str,
    batch_id: int,
    planned_ms: int | None = None,
) -> bool:
    """Whether the Delta table at ``path`` has batch ``batch_id`` of stream ``app_id``.

    With ``planned_ms`` (when the batch was planned: a stream's replay), the table's
    history is read from its newest commit back to the newest one of this stream (a
    stream's batches reach a table in order): the batch landed when that commit's batch id
    is ``batch_id`` or later. Commits older than ``planned_ms`` (less a margin for clocks)
    end the look: the batch did not land. Without ``planned_ms`` (callers that read no
    checkpoint, whose every append carries them), and without a commit of this stream,
    Delta's own transaction ids (``txnAppId``) answer.

    Raises:
        HistoryCleanedError: the history was cleaned up past the batch's start, so neither
            answer can be proven; the message says what to do.
    """
    from delta.tables import DeltaTable

    if not is_delta_table(path, spark):
        return False
    table = DeltaTable.forPath(spark, path)
    if planned_ms is None:
        return _txn_version(table, app_id) >= batch_id
    since, limit = planned_ms - CLOCK_MARGIN_MS, HISTORY_PAGE
    while True:
        commits = _newest_commits(table, limit)
        for commit in commits:  # newest first
            marker = read_batch_marker(commit["userMetadata"])
            if marker is not None and marker[0] == app_id:
                return marker[1] >= batch_id
            if commit["ms"] < since:
                return _txn_version(table, app_id) >= batch_id
        if len(commits) == limit:
            limit *= 4
            continue
        if not commits or commits[-1]["version"] == 0:
            return _txn_version(table, app_id) >= batch_id
        raise HistoryCleanedError(
            f"{path}: its history starts at version {commits[-1]['version']}, after batch "
            f"{batch_id} of stream {app_id} began, so whether that batch landed cannot be "
            "told. Restore the table's log, or compare the table with the batch's source "
            "offsets by hand; a new checkpoint would read the source again from its start."
        )


def _newest_commits(table: Any, limit: int) -> list[Any]:
    """The table's newest ``limit`` commits, newest first: version, ms (epoch), userMetadata."""
    history = table.history(limit)
    return history.selectExpr("version", "unix_millis(timestamp) AS ms", "userMetadata").collect()


def _txn_version(table: Any, app_id: str) -> int:
    """The batch id Delta's transaction ids record for ``app_id`` in the table (-1: none)."""
    # DeltaTable.forPath brought the log up to date: its latest snapshot is the current one
    snapshot = table._jdt.deltaLog().unsafeVolatileSnapshot()
    version = snapshot.transactions().get(app_id)
    return int(version.get()) if version.isDefined() else -1
