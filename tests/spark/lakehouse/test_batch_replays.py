"""Idempotent micro-batch appends on real Delta tables: only a batch that an earlier run may
have written is looked up (in the table's history), every commit names its stream and batch,
and a history that no longer reaches the batch is an error, never a guess."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from lakehouse.checkpoints import LogEntry, newest_batch, replays_of
from lakehouse.delta import (
    HistoryCleanedError,
    Replays,
    append_idempotent,
    batch_landed,
    read_batch_marker,
)
from tests.support.checkpoints import write_checkpoint_batch
from tests.support.delta_log import commit_actions

SOURCE = {"topic": {"0": 5}}


def rows(spark: Any, n: int) -> Any:
    return spark.range(n).selectExpr("id")


def test_a_fresh_batch_is_appended_blind_and_a_replay_of_it_is_skipped(
    spark: Any, tmp_path: Path
) -> None:
    path = tmp_path / "t"
    fresh = Replays(fresh_from=0)
    append_idempotent(rows(spark, 3), str(path), "app-1", 0, replays=fresh)
    append_idempotent(rows(spark, 2), str(path), "app-1", 1, replays=fresh)
    log = commit_actions(path)
    markers = [read_batch_marker(c["commitInfo"].get("userMetadata")) for c in log]
    assert markers == [("app-1", 0), ("app-1", 1)]
    assert not any("txn" in c for c in log)  # no Delta transaction ids: nothing to reconstruct

    # the restarted query replays batch 1 (planned, not committed): the table has it
    replayed = Replays(fresh_from=2, planned_ms=int(time.time() * 1000))
    append_idempotent(rows(spark, 2), str(path), "app-1", 1, replays=replayed)
    assert spark.read.format("delta").load(str(path)).count() == 5
    assert len(commit_actions(path)) == 2

    # another stream's batch 1 is not this one's; the replay's append carries Delta's ids
    append_idempotent(rows(spark, 4), str(path), "app-2", 1, replays=replayed)
    assert spark.read.format("delta").load(str(path)).count() == 9
    last = commit_actions(path)[-1]
    assert last["txn"]["appId"] == "app-2" and last["txn"]["version"] == 1
    assert read_batch_marker(last["commitInfo"]["userMetadata"]) == ("app-2", 1)


def test_the_newest_commit_of_the_stream_answers_whatever_came_after_it(
    spark: Any, tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    planned = int(time.time() * 1000)  # when the batches being looked up were planned
    fresh = Replays(fresh_from=0)
    append_idempotent(rows(spark, 1), path, "app-1", 4, replays=fresh)
    for batch in range(3):  # other streams commit after it
        append_idempotent(rows(spark, 1), path, f"other-{batch}", batch, replays=fresh)
    assert batch_landed(spark, path, "app-1", 4, planned)
    assert batch_landed(spark, path, "app-1", 3, planned)
    assert not batch_landed(spark, path, "app-1", 5, planned)
    assert not batch_landed(spark, path, "app-9", 0, planned)  # the whole history says so
    assert not batch_landed(spark, str(tmp_path / "missing"), "app-1", 0, planned)
    # without a plan time, Delta's transaction ids alone answer: blind appends have none
    assert not batch_landed(spark, path, "app-1", 4)


def test_commits_older_than_the_batch_end_the_look(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    before_every_commit = int(time.time() * 1000) - 60 * 60 * 1000  # an hour before
    append_idempotent(rows(spark, 1), str(path), "app-1", 0, replays=Replays(0))
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = 1)")
    for batch in (1, 2):
        append_idempotent(rows(spark, 1), str(path), "app-1", batch, replays=Replays(0))
    assert list((path / "_delta_log").glob("*.checkpoint.parquet"))
    # log clean-up removed the first commit (a checkpoint keeps the table readable): only the
    # commits' age can end the look now
    (path / "_delta_log" / f"{0:020d}.json").unlink()
    after_every_commit = int(time.time() * 1000) + 60 * 60 * 1000  # an hour after
    assert not batch_landed(spark, str(path), "app-7", 3, planned_ms=after_every_commit)
    assert batch_landed(spark, str(path), "app-1", 2, planned_ms=before_every_commit)
    with pytest.raises(HistoryCleanedError, match="starts at version 1, after batch 3 of stream"):
        batch_landed(spark, str(path), "app-7", 3, planned_ms=before_every_commit)

    # a caller without a checkpoint (protolake replay) writes with Delta's ids: they answer
    append_idempotent(rows(spark, 2), str(path), "replay-1", 9)
    append_idempotent(rows(spark, 2), str(path), "replay-1", 9)
    assert batch_landed(spark, str(path), "replay-1", 9)
    assert spark.read.format("delta").load(str(path)).count() == 3 + 2


def test_a_batch_recorded_with_delta_transaction_ids_alone_is_found(
    spark: Any, tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    writer = rows(spark, 2).write.format("delta").mode("append")
    writer.option("txnAppId", "app-1").option("txnVersion", 6).save(path)
    assert batch_landed(spark, path, "app-1", 6)
    assert not batch_landed(spark, path, "app-1", 7)
    append_idempotent(rows(spark, 2), path, "app-1", 6)
    assert spark.read.format("delta").load(path).count() == 2


def test_replays_of_a_checkpoint(spark: Any, tmp_path: Path) -> None:
    checkpoint = tmp_path / "cp"
    assert replays_of(spark, str(checkpoint)) == Replays(fresh_from=0)
    write_checkpoint_batch(checkpoint, 0, SOURCE)
    write_checkpoint_batch(checkpoint, 1, SOURCE)
    assert replays_of(spark, str(checkpoint)) == Replays(fresh_from=2)
    write_checkpoint_batch(checkpoint, 2, SOURCE, committed=False, timestamp_ms=1_700_000_000_000)
    replays = replays_of(spark, str(checkpoint))
    assert replays == Replays(fresh_from=3, planned_ms=1_700_000_000_000)
    assert [replays.may_be_written(b) for b in (2, 3, 4)] == [True, False, False]
    assert Replays().may_be_written(10**6)

    # an offset log without its metadata line: the file's time says when it was planned
    entry = checkpoint / "offsets" / "2"
    entry.write_text("v1\n")
    os.utime(entry, (1_600_000_000, 1_600_000_000))
    assert replays_of(spark, str(checkpoint)).planned_ms == 1_600_000_000_000


def test_the_newest_batch_of_a_checkpoint_log_is_the_highest_number(
    spark: Any, tmp_path: Path
) -> None:
    log = tmp_path / "cp" / "commits"
    assert newest_batch(spark, str(log)) is None  # no folder
    log.mkdir(parents=True)
    assert newest_batch(spark, str(log)) is None  # no batch yet
    for batch, seconds in ((2, 1_600_000_200), (10, 1_600_001_000), (9, 1_600_000_900)):
        (log / str(batch)).write_text("v1\n{}\n")
        os.utime(log / str(batch), (seconds, seconds))
    (log / ".10.crc").write_text("")  # Hadoop's checksum files and temporaries are no batches
    (log / "11.tmp").write_text("")
    assert newest_batch(spark, str(log)) == LogEntry(batch_id=10, modified_ms=1_600_001_000_000)


class ConcurrentAppendException(Exception):  # noqa: N818 - the name Delta gives it
    """Named as Delta's: ``is_delta_conflict`` reads it as a lost race, to be retried."""


def test_a_blind_append_that_landed_before_its_error_is_not_retried(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql.readwriter import DataFrameWriter

    path = str(tmp_path / "t")
    fresh = Replays(fresh_from=0)
    append_idempotent(rows(spark, 2), path, "app-1", 0, replays=fresh)
    real_save = DataFrameWriter.save
    failures: list[str] = []

    def save_then_fail_once(self: Any, *args: Any, **kwargs: Any) -> None:
        real_save(self, *args, **kwargs)
        if not failures:
            failures.append("after")
            raise ConcurrentAppendException("the commit landed, then this error")

    monkeypatch.setattr(DataFrameWriter, "save", save_then_fail_once)
    append_idempotent(rows(spark, 3), path, "app-1", 1, replays=fresh)
    assert failures == ["after"]
    assert spark.read.format("delta").load(path).count() == 2 + 3  # landed once

    def fail_once_then_save(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(failures) < 2:
            failures.append("before")
            raise ConcurrentAppendException("lost the race: nothing landed")
        real_save(self, *args, **kwargs)

    monkeypatch.setattr(DataFrameWriter, "save", fail_once_then_save)
    append_idempotent(rows(spark, 4), path, "app-1", 2, replays=fresh)
    assert failures == ["after", "before"]
    assert spark.read.format("delta").load(path).count() == 2 + 3 + 4  # retried, landed once
