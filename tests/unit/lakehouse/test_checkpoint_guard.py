"""lakehouse.checkpoint_guard: one process per local checkpoint, a killed holder never blocks
its restart, and the same process may guard again (real processes, real ``flock``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lakehouse.checkpoint_guard import (
    CheckpointInUseError,
    guard_checkpoint,
    release_checkpoints,
)

HOLDER = """
import sys
from lakehouse.checkpoint_guard import guard_checkpoint
guard_checkpoint(sys.argv[1])
print("held", flush=True)
sys.stdin.read()  # until the test closes it, or kills this process
"""


def hold_in_another_process(checkpoint: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(checkpoint)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def guard_in_another_process(checkpoint: Path) -> subprocess.CompletedProcess[str]:
    """Guard ``checkpoint`` from a new process that then exits."""
    code = (
        "import sys; from lakehouse.checkpoint_guard import guard_checkpoint as g; g(sys.argv[1])"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(checkpoint)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[3],
    )


def test_a_second_process_is_refused_until_the_first_is_killed(tmp_path: Path) -> None:
    checkpoint = tmp_path / "lh" / "_checkpoints" / "silver" / "t"
    holder = hold_in_another_process(checkpoint)
    try:
        with pytest.raises(CheckpointInUseError, match=f"pid {holder.pid} on .* runs this query"):
            guard_checkpoint(str(checkpoint))
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    guard_checkpoint(str(checkpoint))  # the killed holder's lock ended with it
    guard_checkpoint(str(checkpoint))  # again from the same process: a no-op
    assert f"pid {os.getpid()} " in (checkpoint / "_protolake_running").read_text()
    release_checkpoints(str(tmp_path / "lh" / "_checkpoints" / "silver"))
    assert guard_in_another_process(checkpoint).returncode == 0  # released: another takes it


def test_release_keeps_the_checkpoints_of_other_jobs(tmp_path: Path) -> None:
    root = tmp_path / "_checkpoints"
    guard_checkpoint(str(root / "bronze" / "per_topic"))
    guard_checkpoint(str(root / "silver" / "a"))
    release_checkpoints(str(root / "silver"))
    assert guard_in_another_process(root / "silver" / "a").returncode == 0
    refused = guard_in_another_process(root / "bronze" / "per_topic")
    assert refused.returncode == 1
    assert f"CheckpointInUseError: {root}/bronze/per_topic: pid {os.getpid()} " in refused.stderr
    release_checkpoints(str(root / "bronze" / "per_topic"))
    assert guard_in_another_process(root / "bronze" / "per_topic").returncode == 0


def test_an_object_store_checkpoint_takes_no_lock() -> None:
    guard_checkpoint("s3a://bucket/lh/_checkpoints/bronze/per_topic")  # the writer lease guards
    release_checkpoints("s3a://bucket/lh/_checkpoints")
