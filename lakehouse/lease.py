"""One writing driver per table on an object store: a writer lease, taken with a conditional put.

Delta's log store for ``s3a://`` (``S3SingleDriverLogStore``) serializes the commits of one
JVM; two drivers committing to one table could overwrite each other's commit. So a job that
writes an object-store lakehouse first takes the lease of what it writes
(:meth:`lakehouse.layout.Layout.writer_lease`: ``bronze``, or ``silver`` for silver, quarantine
and quality results), and a second driver is refused with :class:`WriterLeaseError` before it
writes anything.

The lease is a small object created with S3's conditional put (``If-None-Match: *``, through
S3A's ``fs.option.create.conditional.overwrite``): of two drivers creating it at once, exactly
one succeeds. It names its owner and an expiry; the owner renews it every ``ttl / 4`` seconds
from a daemon thread and deletes it when done. A driver that died leaves a lease that expires
after ``ttl`` seconds: the next driver takes it over (deletes it, then creates its own, again
conditionally). Local lakehouses take no lease (a local folder has one driver by nature).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse.layout import Layout

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

LEASE_TTL_SECONDS = 120.0
CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite"


class WriterLeaseError(RuntimeError):
    """Another driver holds the writer lease; the message names it."""


@dataclass
class WriterLease:
    """A held lease; :meth:`release` deletes it (also when the owner stops renewing)."""

    location: str
    owner: str
    ttl: float
    _fs: Any = None
    _path: Any = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        """Stop renewing and delete the lease if it is still this driver's."""
        self._stop.set()
        holder = _read(self._fs, self._path)
        if holder is not None and holder.get("owner") == self.owner:
            self._fs.delete(self._path, False)
            log.info("writer lease %s released", self.location)

    def _renew_forever(self) -> None:
        while not self._stop.wait(self.ttl / 4):
            holder = _read(self._fs, self._path)
            if holder is None or holder.get("owner") != self.owner:
                log.error("writer lease %s was taken by another driver", self.location)
                return
            _write(self._fs, self._path, _content(self.owner, self.ttl), conditional=False)


def take_writer_lease(spark: SparkSession, root: str, name: str) -> WriterLease | None:
    """The lease ``name`` of the lakehouse at ``root``; None for a local lakehouse.

    Raises:
        WriterLeaseError: another driver holds it.
    """
    layout = Layout(root)
    if layout.is_local:
        return None
    return acquire_writer_lease(spark, layout.writer_lease(name))


def acquire_writer_lease(
    spark: SparkSession, location: str, ttl: float = LEASE_TTL_SECONDS
) -> WriterLease:
    """Take the lease at ``location`` (an object-store URI), renewed until released.

    Raises:
        WriterLeaseError: another driver holds it and it has not expired.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(location)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())  # type: ignore[union-attr]
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    for _ in range(2):
        try:
            _write(fs, path, _content(owner, ttl), conditional=True)
            break
        except Exception as exc:  # noqa: BLE001 - py4j error: the lease exists (412) or worse
            holder = _read(fs, path)
            if holder is None:
                raise  # not a lease held by someone: the write itself failed
            if float(holder.get("expires", 0)) > time.time():
                raise WriterLeaseError(
                    f"{location}: held by another driver ({holder.get('owner')}) until "
                    f"{time.strftime('%H:%M:%S', time.localtime(float(holder['expires'])))}; "
                    "one driver writes these tables at a time on an object store"
                ) from exc
            log.warning(
                "writer lease %s of %s expired: taking it over", location, holder.get("owner")
            )
            fs.delete(path, False)
    else:
        raise WriterLeaseError(f"{location}: taken over by another driver meanwhile")
    lease = WriterLease(location, owner, ttl, fs, path)
    threading.Thread(target=lease._renew_forever, name="writer-lease", daemon=True).start()
    log.info("writer lease %s taken (%s)", location, owner)
    return lease


def _content(owner: str, ttl: float) -> str:
    return json.dumps({"owner": owner, "expires": time.time() + ttl})


def _write(fs: Any, path: Any, text: str, *, conditional: bool) -> None:
    builder = fs.createFile(path).overwrite(not conditional)
    if conditional:
        builder = builder.must(CONDITIONAL_CREATE, True)
    out = builder.build()
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()  # S3A puts the object here: a held lease fails the close (HTTP 412)


def _read(fs: Any, path: Any) -> dict[str, Any] | None:
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        data = bytes(stream.readAllBytes())
    finally:
        stream.close()
    try:
        value = json.loads(data.decode("utf-8"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
