"""One running query per local checkpoint: an exclusive lock on a file inside it.

Spark refuses a second query on a checkpoint within one JVM, not in another process. Two
processes on one checkpoint would both run the batch the checkpoint left unfinished, and
only the first batch of a run is looked up before its appends
(:func:`lakehouse.delta.append_idempotent`): the second process's fresh batches would be
written blind beside the first's replay of them. So a streaming job guards each local
checkpoint it runs (:func:`guard_checkpoint`) before reading which batches may be replays;
a second process is refused with :class:`CheckpointInUseError`, before it writes anything.

The lock is the operating system's (``flock``) on ``_protolake_running`` inside the
checkpoint: it ends with the process that holds it, however that process ends, so a killed
job never blocks its restart. A process holds it until its run ends
(:func:`run_locks`: the checkpoints one run took, released once its queries have ended; a
run that does not await its queries keeps them until the process exits); guarding
again from the same process is a no-op (Spark keeps one process from running a query
twice). An object-store checkpoint takes no lock here: one driver writes an object-store
lakehouse, under the job's writer lease (:mod:`lakehouse.lease`).
"""

from __future__ import annotations

import fcntl
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from lakehouse.layout import Layout, local_path
from lakehouse.lease import WriterLeaseError

_held: dict[str, IO[str]] = {}  # checkpoint -> its open, locked file
_registry_lock = threading.Lock()


class CheckpointInUseError(WriterLeaseError):
    """Another process runs a query on this checkpoint; the message names it."""


#: what a refusal says the lock's holder does, by default
RUNS_THE_QUERY = (
    "runs this query already; stop it before starting another (two runs would write the "
    "same batches)"
)


def guard_checkpoint(checkpoint: str, holder_does: str = RUNS_THE_QUERY) -> bool:
    """Lock the local ``checkpoint`` for this process (any local folder: a job's other locks
    too, with ``holder_does`` saying what a refused caller's holder is doing).

    Returns:
        True when this call took the lock; False when this process held it already, or the
        checkpoint is on an object store (nothing to lock).

    Raises:
        CheckpointInUseError: another process holds it.
    """
    running = local_path(Layout.running_file(checkpoint))
    if running is None:
        return False
    key = str(running.parent)
    with _registry_lock:
        if key in _held:
            return False
        running.parent.mkdir(parents=True, exist_ok=True)
        file = running.open("a+", encoding="utf-8")
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            holder = file.read().strip() or "a process"
            file.close()
            raise CheckpointInUseError(f"{checkpoint}: {holder} {holder_does}") from None
        file.seek(0)
        file.truncate()
        file.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        file.flush()
        _held[key] = file
        return True


def release_checkpoint(checkpoint: str) -> None:
    """Unlock ``checkpoint`` if this process holds it."""
    running = local_path(Layout.running_file(checkpoint))
    if running is None:
        return
    with _registry_lock:
        file = _held.pop(str(running.parent), None)
        if file is not None:
            file.close()  # closing the file drops its lock


class CheckpointLocks:
    """The local checkpoints one run of a job locked: each taken before its query starts,
    released together once the run's queries have ended (a lock this process held before
    the run stays with its taker)."""

    def __init__(self) -> None:
        self._taken: list[str] = []
        self._lock = threading.Lock()

    def take(self, checkpoint: str) -> None:
        """Lock ``checkpoint`` (see :func:`guard_checkpoint`)."""
        if guard_checkpoint(checkpoint):
            with self._lock:
                self._taken.append(checkpoint)

    def release(self) -> None:
        """Unlock every checkpoint this run took."""
        with self._lock:
            taken, self._taken = self._taken, []
        for checkpoint in taken:
            release_checkpoint(checkpoint)


@contextmanager
def run_locks(awaited: bool) -> Iterator[CheckpointLocks]:
    """The checkpoint locks of one run of a job, released as the run ends: always when it
    fails (its queries were stopped, or none started), and when it succeeds only if it
    awaited its queries (a run that returns them running keeps its locks)."""
    locks = CheckpointLocks()
    try:
        yield locks
    except BaseException:
        locks.release()
        raise
    if awaited:
        locks.release()
