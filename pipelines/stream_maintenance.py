"""The tables of an object-store lakehouse kept by the processing-time stream that writes them.

On ``s3a://`` one driver writes a table group at a time (``lakehouse.lease``), so while the
bronze or silver stream runs, ``protolake maintain`` is refused the lease of its groups, and
the streams' micro-batches would pile up small files for as long as they run. So that driver
maintains what it writes (:class:`StreamMaintainer`, a thread beside its queries):

- every ``[maintenance] stream_optimize_minutes``: OPTIMIZE each table of its groups
  (``pipelines.ops.maintain.maintain``: bronze, or silver + quarantine + quality, the quality
  results older than ``[quality] results_retention_days`` deleted first);
- every ``stream_vacuum_hours``: VACUUM them too, keeping ``stream_retention_hours`` (168 at
  least, Delta's safety minimum; a bronze file silver has yet to read is kept,
  ``pipelines.ops.unread_bronze``).

Its commits go through the same JVM as the stream's appends (Delta's S3 log store serializes
them); OPTIMIZE's are ``dataChange = false``, which no append conflicts with, and one that
loses to a schema change is tried again at the next pass. A pass runs under a Spark job group
of its own: when the job stops, the pass under way is cancelled and waited for before the
lease goes (a pass that does not end in time leaves the lease to expire instead of deleting
it). Each pass is published in the writer lease (``notes.maintenance``: groups, intervals,
retention, when the maintainer started, the last pass, the last VACUUM and their failures),
so ``protolake maintain`` refused that lease can tell whether the stream keeps its group as
asked and step aside (:func:`stream_keeps`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakehouse.lease import WriterLease, WriterLeaseError, raise_if_lost
from pipelines.failure_line import failure_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.settings import ProtolakeConfig

log = logging.getLogger("pipelines.stream_maintenance")

#: the table groups (``pipelines.ops.maintain.GROUPS``) each streaming job writes
GROUPS_OF_JOB = {"bronze": ("bronze",), "silver": ("silver", "quarantine", "quality")}
#: the lease note a maintaining stream publishes
NOTE = "maintenance"
#: how long a stopping job waits for the pass under way once its Spark jobs are cancelled
MAINTAINER_WAIT_SECONDS = 30.0
#: how late a pass may be, beyond its interval, before the stream no longer counts as keeping
#: its tables (a pass over many tables takes a while)
GRACE_SECONDS = 1800.0


class StreamMaintainer:
    """OPTIMIZE (and VACUUM, less often) of ``job``'s table groups on an interval, from a
    daemon thread (``<job>-maintenance``) of the streaming driver that holds ``lease``; ends
    at :meth:`stop`, or when it wakes to find the lease released or lost, or ``running()``
    false (the stream ended). Its note leaves the lease when it ends."""

    def __init__(
        self,
        spark: SparkSession,
        cfg: ProtolakeConfig,
        job: str,
        lease: WriterLease,
        running: Callable[[], bool] = lambda: True,
    ) -> None:
        m = cfg.maintenance
        self.spark, self.cfg, self.lease, self.running = spark, cfg, lease, running
        self.groups = GROUPS_OF_JOB[job]
        self.interval = m.stream_optimize_minutes * 60.0
        self.vacuum_every = m.stream_vacuum_hours * 3600.0
        self.retention_hours = m.stream_retention_hours
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{job}-maintenance", daemon=True)
        self._job_group = f"protolake-{job}-maintenance-{uuid.uuid4().hex[:8]}"
        self._status: dict[str, Any] = {
            "groups": list(self.groups),
            "interval_seconds": self.interval,
            "vacuum_every_seconds": self.vacuum_every,
            "retention_hours": self.retention_hours,
            "since": time.time(),
            "last_pass": None,
            "last_vacuum": None,
            "failed": [],
        }

    def start(self) -> StreamMaintainer:
        self.lease.note(NOTE, dict(self._status))
        self._thread.start()
        log.info(
            "%s: OPTIMIZE every %g min, VACUUM every %g h keeping %g h, while the stream runs",
            "/".join(self.groups),
            self.interval / 60,
            self.vacuum_every / 3600,
            self.retention_hours,
        )
        return self

    def stop(self, timeout: float | None = MAINTAINER_WAIT_SECONDS) -> bool:
        """Start no further table, cancel the Spark jobs of the pass under way and wait for
        it (at most ``timeout``). Returns whether the thread ended; if not, the lease is left
        to expire rather than deleted when released (the pass may still commit)."""
        self._stop.set()
        if not self._thread.is_alive() or self._thread is threading.current_thread():
            return True
        try:
            self.spark.sparkContext.cancelJobGroup(self._job_group)
        except Exception as exc:  # noqa: BLE001 - the JVM may be going down
            log.warning("maintenance: its Spark jobs not cancelled: %s", failure_line(exc))
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("maintenance: a pass is still under way; the writer lease will expire")
            self.lease.expire_only()
            return False
        return True

    def _run(self) -> None:
        self.spark.sparkContext.setJobGroup(
            self._job_group, "protolake: stream maintenance", interruptOnCancel=True
        )
        try:
            while not self._stop.wait(self.interval):
                if self.lease.released or self.lease.loss() is not None or not self.running():
                    return
                self.run_pass()
        finally:
            self.lease.note(NOTE, None)

    def _still_writer(self) -> None:
        """Raise before the next table once the job stops or the lease is gone."""
        if self._stop.is_set() or self.lease.released:
            raise WriterLeaseError(f"{self.lease.location}: the job is stopping")
        raise_if_lost([self.lease])

    def run_pass(self) -> dict[str, Any]:
        """One pass over the groups (VACUUM too when due); published in the lease. Never
        raises: a failure is published and the next pass tries again (a pass cut short by
        :meth:`stop` publishes nothing)."""
        now = time.time()
        last_vacuum = self._status["last_vacuum"]
        vacuum = self.vacuum_every > 0 and (
            last_vacuum is None or now - last_vacuum >= self.vacuum_every
        )
        failed: list[dict[str, str]] = []
        for group in self.groups:
            if self._stop.is_set():
                break
            try:
                failed += self._maintain(group, vacuum)
            except Exception as exc:  # noqa: BLE001 - the next pass tries again
                failed.append({"table": group, "error": failure_line(exc)})
        if self._stop.is_set():  # cut short by the job's stop: not a failure, nothing to publish
            log.info("maintenance: pass cut short, the job is stopping")
            return dict(self._status)
        for f in failed:
            log.warning("maintenance of %s failed (tried again next pass): %s", *f.values())
        self._status.update(last_pass=time.time(), failed=failed)
        if vacuum and not failed:
            self._status["last_vacuum"] = now
        self.lease.note(NOTE, dict(self._status))
        return dict(self._status)

    def _maintain(self, group: str, vacuum: bool) -> list[dict[str, str]]:
        from pipelines.ops.maintain import maintain
        from pipelines.quality_retention import prune_quality_results

        if group == "quality":
            self._still_writer()
            prune_quality_results(self.spark, self.cfg)
        done = maintain(
            self.spark,
            self.cfg.lakehouse_path,
            group=group,
            retention_hours=self.retention_hours,
            vacuum=vacuum,
            show_progress=False,
            still_writer=self._still_writer,
        )
        return list(done["failed"])


def start_maintainer(
    spark: SparkSession,
    cfg: ProtolakeConfig,
    job: str,
    trigger: str,
    lease: WriterLease | None,
    running: Callable[[], bool],
) -> StreamMaintainer | None:
    """A started :class:`StreamMaintainer` for a processing-time ``job`` that holds a writer
    ``lease`` (an object-store lakehouse), unless ``[maintenance]`` turns it off; else None.
    ``running()``: whether the job's queries still run."""
    off = cfg.maintenance.stream_optimize_minutes <= 0
    if lease is None or trigger != "processing-time" or off:
        return None
    return StreamMaintainer(spark, cfg, job, lease, running).start()


def stream_keeps(
    holder: dict[str, Any] | None, group: str, *, retention_hours: float, vacuum: bool
) -> tuple[bool, str] | None:
    """Whether the stream whose writer lease is ``holder`` keeps ``group`` as asked (OPTIMIZE,
    and VACUUM keeping ``retention_hours`` when ``vacuum``), with the reason; None when it
    publishes no maintenance of that group."""
    note = ((holder or {}).get("notes") or {}).get(NOTE)
    if not isinstance(note, dict) or group not in (note.get("groups") or []):
        return None
    now, since = time.time(), float(note.get("since") or 0)
    every = float(note.get("interval_seconds") or 0)
    last = float(note.get("last_pass") or since)
    if note.get("failed"):
        return False, f"its last maintenance pass failed: {note['failed'][0].get('error')}"
    if now - last > every + GRACE_SECONDS:
        return False, f"its last maintenance pass ({_clock(last)}) is late"
    if vacuum:
        vacuum_every = float(note.get("vacuum_every_seconds") or 0)
        kept = float(note.get("retention_hours") or 0)
        if vacuum_every <= 0:
            return False, "it does not VACUUM ([maintenance] stream_vacuum_hours = 0)"
        if kept != retention_hours:
            return False, f"it VACUUMs keeping {kept:g} h, not {retention_hours:g} h"
        last_vacuum = float(note.get("last_vacuum") or since)
        # a VACUUM runs with a pass: up to a pass's interval after it falls due
        if now - last_vacuum > vacuum_every + every + GRACE_SECONDS:
            return False, f"its last VACUUM ({_clock(last_vacuum)}) is late"
    owner = (holder or {}).get("owner")
    done = f"last pass {_clock(last)}" if note.get("last_pass") else f"since {_clock(since)}"
    return True, f"kept by the stream that writes it ({owner}: every {every / 60:g} min, {done})"


def _clock(when: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(when))
