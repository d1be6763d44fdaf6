"""lakehouse.checkpoint_guard: one process per local checkpoint, a killed holder never blocks
its restart, the same process may guard again, and a run releases only what it took (real
processes, real ``flock``)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakehouse.checkpoint_guard import (
    CheckpointInUseError,
    CheckpointLocks,
    guard_checkpoint,
    release_checkpoint,
    run_locks,
)
from tests.support.lock_holder import guard_in_another_process, hold_in_another_process


@pytest.fixture
def checkpoints(tmp_path: Path) -> Iterator[Path]:
    """A checkpoints folder; whatever this process locked there is unlocked afterwards."""
    root = tmp_path / "lh" / "_checkpoints"
    yield root
    for folder in root.glob("*/*"):
        release_checkpoint(str(folder))


def test_a_second_process_is_refused_until_the_first_is_killed(checkpoints: Path) -> None:
    checkpoint = checkpoints / "silver" / "t"
    holder = hold_in_another_process(checkpoint)
    try:
        with pytest.raises(CheckpointInUseError, match=f"pid {holder.pid} on .* runs this query"):
            guard_checkpoint(str(checkpoint))
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    assert guard_checkpoint(str(checkpoint))  # the killed holder's lock ended with it
    assert not guard_checkpoint(str(checkpoint))  # again from the same process: a no-op
    assert f"pid {os.getpid()} " in (checkpoint / "_protolake_running").read_text()
    refused = guard_in_another_process(checkpoint)
    assert refused.returncode == 1
    assert f"CheckpointInUseError: {checkpoint}: pid {os.getpid()} " in refused.stderr
    release_checkpoint(str(checkpoint))
    assert guard_in_another_process(checkpoint).returncode == 0  # released: another takes it


def test_a_run_releases_only_the_locks_it_took(checkpoints: Path) -> None:
    kept, shared, own = (checkpoints / "silver" / n for n in ("kept", "shared", "own"))
    guard_checkpoint(str(kept))  # taken before the run, by someone else in this process
    guard_checkpoint(str(shared))
    run = CheckpointLocks()
    run.take(str(shared))  # held already: still the first taker's
    run.take(str(own))
    run.release()
    assert guard_in_another_process(own).returncode == 0
    for still_held in (kept, shared):
        assert guard_in_another_process(still_held).returncode == 1


def test_an_object_store_checkpoint_takes_no_lock() -> None:
    assert not guard_checkpoint("s3a://bucket/lh/_checkpoints/bronze/per_topic")
    release_checkpoint("s3a://bucket/lh/_checkpoints/bronze/per_topic")


def test_run_locks_are_kept_only_by_a_run_that_returns_its_queries_running(
    checkpoints: Path,
) -> None:
    awaited, running, failed = (
        checkpoints / "silver" / n for n in ("awaited", "running", "failed")
    )
    with run_locks(awaited=True) as locks:
        locks.take(str(awaited))
    with run_locks(awaited=False) as locks:
        locks.take(str(running))
    with pytest.raises(RuntimeError, match="no query started"), run_locks(awaited=False) as locks:
        locks.take(str(failed))
        raise RuntimeError("no query started")
    assert guard_in_another_process(awaited).returncode == 0
    assert guard_in_another_process(failed).returncode == 0
    assert guard_in_another_process(running).returncode == 1
