"""The tables of an object-store lakehouse kept by the processing-time stream that writes them.

On ``s3a://`` one driver writes a table group at a time (``lakehouse.lease``), so while the
bronze or silver stream runs, ``protolake maintain`` is refused the lease of its groups, and
the streams' micro-batches would pile up small files for as long as they run. So that driver
maintains what it writes (:class:`StreamMaintainer`, a thread beside its queries):

- every ``[maintenance] stream_optimize_minutes``: OPTIMIZE each table of its groups
  (``pipelines.ops.maintain.maintain``: bronze, or silver + quarantine + quality, the quality
  results older than ``[quality] results_retention_days`` deleted first);
- every ``stream_vacuum_hours``: VACUUM them too, keeping 168 hours (Delta's safety minimum;
  a bronze file silver has yet to read is kept, ``pipelines.ops.unread_bronze``).

Its commits go through the same JVM as the stream's appends (Delta's S3 log store serializes
them); OPTIMIZE's are ``dataChange = false``, which no append conflicts with, and one that
loses to a schema change is tried again at the next pass. Each pass is published in the
writer lease (``notes.maintenance``: groups, interval, when the maintainer started, the last
pass and its failures), so ``protolake maintain`` refused that lease can tell that its group
is maintained and step aside (:func:`maintained_by_holder`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from lakehouse.lease import WriterLease, raise_if_lost

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.settings import ProtolakeConfig

log = logging.getLogger("pipelines.stream_maintenance")

#: the table groups (``pipelines.ops.maintain.GROUPS``) each streaming job writes
GROUPS_OF_JOB = {"bronze": ("bronze",), "silver": ("silver", "quarantine", "quality")}
#: the lease note a maintaining stream publishes
NOTE = "maintenance"
#: how long a stopping job waits for a pass under way (an OPTIMIZE it cuts short commits
#: nothing; its files are VACUUM's)
MAINTAINER_WAIT_SECONDS = 10.0
#: how late a pass may be, beyond its interval, before the stream no longer counts as keeping
#: its tables (a pass over many tables takes a while)
GRACE_SECONDS = 1800.0


class StreamMaintainer:
    """OPTIMIZE (and VACUUM, less often) of ``job``'s table groups on an interval, from a
    daemon thread (``<job>-maintenance``) of the streaming driver that holds ``lease``; ends
    at :meth:`stop`, or when it wakes to find the lease released or lost, or ``running()``
    false (the stream ended)."""

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
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{job}-maintenance", daemon=True)
        self._last_vacuum: float | None = None
        self._status: dict[str, Any] = {
            "groups": list(self.groups),
            "interval_seconds": self.interval,
            "since": time.time(),
            "last_pass": None,
            "failed": [],
        }

    def start(self) -> StreamMaintainer:
        self.lease.note(NOTE, dict(self._status))
        self._thread.start()
        log.info(
            "%s: OPTIMIZE every %g min, VACUUM every %g h, while the stream runs",
            "/".join(self.groups),
            self.interval / 60,
            self.vacuum_every / 3600,
        )
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Start no further pass (one under way ends with its table) and wait ``timeout``."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if self.lease.released or self.lease.loss() is not None or not self.running():
                return
            self.run_pass()

    def run_pass(self) -> dict[str, Any]:
        """One pass over the groups (VACUUM too when due); published in the lease."""
        from pipelines.ops.maintain import maintain
        from pipelines.quality_retention import prune_quality_results

        now = time.time()
        vacuum = self.vacuum_every > 0 and (
            self._last_vacuum is None or now - self._last_vacuum >= self.vacuum_every
        )
        failed: list[dict[str, str]] = []
        for group in self.groups:
            try:
                if group == "quality":
                    prune_quality_results(self.spark, self.cfg)
                done = maintain(
                    self.spark,
                    self.cfg.lakehouse_path,
                    group=group,
                    vacuum=vacuum,
                    show_progress=False,
                    still_writer=partial(raise_if_lost, [self.lease]),
                )
                failed += done["failed"]
            except Exception as exc:  # noqa: BLE001 - the next pass tries again
                failed.append({"table": group, "error": str(exc).splitlines()[0][:500]})
            if self._stop.is_set():
                break
        if vacuum:
            self._last_vacuum = now
        for f in failed:
            log.warning("maintenance of %s failed (tried again next pass): %s", *f.values())
        self._status.update(last_pass=time.time(), vacuumed=vacuum, failed=failed)
        self.lease.note(NOTE, dict(self._status))
        return dict(self._status)


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


def maintained_by_holder(holder: dict[str, Any] | None, group: str) -> str | None:
    """Why ``group`` needs no other maintenance while the driver whose lease is ``holder``
    runs (a stream that keeps it, with no pass late or failed), or None."""
    note = ((holder or {}).get("notes") or {}).get(NOTE)
    if not isinstance(note, dict) or group not in (note.get("groups") or []):
        return None
    last = note.get("last_pass") or note.get("since") or 0
    interval = float(note.get("interval_seconds") or 0)
    if note.get("failed") or time.time() - float(last) > interval + GRACE_SECONDS:
        return None
    when = time.strftime("%H:%M:%S", time.localtime(float(last)))
    pass_ = f"last pass {when}" if note.get("last_pass") else f"maintaining since {when}"
    every = f"every {interval / 60:g} min"
    owner = (holder or {}).get("owner")
    return f"kept by the stream that writes it ({owner}: OPTIMIZE {every}, {pass_})"
