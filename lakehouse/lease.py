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
after ``ttl`` seconds, or at once for a driver of the same machine once its process has
ended (:mod:`lakehouse.local_process`: a restart after a crash, where the streaming DAG
restarts it): the next driver takes it over by putting its own in place of the version
it read (``If-Match`` on that version's etag, ``fs.option.create.conditional.overwrite.etag``):
of two drivers taking over one expired lease, however long either stalls, exactly one put
succeeds, and the other is refused. Renewals put over the driver's own version the same way, so
a renewal never replaces another driver's lease. (On a store that names no etags, a takeover
deletes the lease, creates its own conditionally and reads it back a moment later.)

A driver that loses its lease (another driver's lease is in its place, the store refused
every renewal until the lease was about to expire, or no renewal came back before
:data:`EXPIRY_MARGIN_SECONDS` ahead of its expiry, one stuck in the store's retries included)
stops writing: the lease calls its ``on_lost`` hook once (the streaming jobs stop their
queries there) and :meth:`WriterLease.raise_if_lost` raises :class:`WriterLeaseError` naming
why; the commands that write check it before their writes (``maintain`` before each table
and before pruning the quality results, ``replay`` before silver's write and before marking
the quarantine). A renewal that the store completes only after that margin began may have
replaced a lease another driver took over meanwhile: it is a loss too, and that driver finds
our lease in its place at its next renewal and stops as well (neither writes on). This bounds,
without fencing tokens, how long two drivers can both believe they write: by the clocks'
difference beyond the margin. A renewal that comes back after the lease was released deletes
what it put, unless the lease is to expire only (:meth:`WriterLease.expire_only`: a thread of
the driver may still commit under it). Local lakehouses take no lease: one machine's Delta log store serializes commits by itself, and
each streaming query's checkpoint is locked by the process that runs it
(:mod:`lakehouse.checkpoint_guard`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse.hadoop import hadoop_path
from lakehouse.layout import Layout
from lakehouse.local_process import ended_here, this_process

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

LEASE_TTL_SECONDS = 120.0
TAKEOVER_SETTLE_SECONDS = 2.0
#: a lease not renewed this long before its expiry counts as lost (at most ``ttl / 8``)
EXPIRY_MARGIN_SECONDS = 15.0
CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite"
#: S3A's ``If-Match`` put: the object is replaced only while it is the version of this etag
CONDITIONAL_ETAG = "fs.option.create.conditional.overwrite.etag"


class WriterLeaseError(RuntimeError):
    """Another driver holds the writer lease; the message names it, and ``holder`` is that
    driver's lease as read (None: the lease was lost, or not read)."""

    def __init__(self, message: str, holder: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.holder = holder


@dataclass
class WriterLease:
    """A held lease; :meth:`release` deletes it (unless :meth:`expire_only` was called)."""

    location: str
    owner: str
    ttl: float
    _fs: Any = None
    _path: Any = None
    on_lost: Callable[[str], None] | None = None
    _expires: float = 0.0
    _lost: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _renewer: threading.Thread | None = None
    _renewal_error: str = ""  # the store's error of the last renewal that failed
    _losing: threading.Lock = field(default_factory=threading.Lock)
    _notes: dict[str, Any] = field(default_factory=dict)  # published at each renewal
    _expire_only: bool = False  # release() leaves the lease to expire

    def note(self, key: str, value: Any) -> None:
        """Publish ``value`` (JSON; None: take ``key`` out) in the lease from its next renewal
        on, for whoever reads it (e.g. a refused driver: ``WriterLeaseError.holder``)."""
        notes = {k: v for k, v in self._notes.items() if k != key}
        self._notes = notes if value is None else {**notes, key: value}

    def expire_only(self) -> None:
        """Make :meth:`release` stop renewing without deleting the lease, which then expires
        at its time: for a driver that may still commit (a thread that did not stop)."""
        self._expire_only = True

    @property
    def released(self) -> bool:
        """Whether :meth:`release` was called."""
        return self._stop.is_set()

    def loss(self) -> str | None:
        """Why this driver no longer holds the lease, or None while it does. A lease this
        driver did not renew by its deadline is lost, whether or not its renewal is still
        running: past the deadline, this call declares the loss (once: the ``on_lost`` hook
        runs then)."""
        if self._lost is None and not self._stop.is_set() and time.time() >= self._deadline():
            self._lose(f"the writer lease was not renewed before its expiry{self._why()}")
        return self._lost

    def _why(self) -> str:
        return f" ({self._renewal_error})" if self._renewal_error else ""

    def _deadline(self) -> float:
        return self._expires - min(EXPIRY_MARGIN_SECONDS, self.ttl / 8)

    def call_on_loss(self, hook: Callable[[str], None]) -> None:
        """Make ``hook`` the ``on_lost`` hook; it is called now if the lease is lost already."""
        self.on_lost = hook
        if self._lost is not None:
            hook(self._lost)

    def raise_if_lost(self) -> None:
        """Raise :class:`WriterLeaseError` if the lease was lost (see :meth:`loss`)."""
        why = self.loss()
        if why is not None:
            raise WriterLeaseError(f"{self.location}: {why}")

    def release(self) -> None:
        """Stop renewing and delete the lease if it is still this driver's (after
        :meth:`expire_only`, leave it to expire at its time).

        Never raises: a store that cannot be reached now (the job may be failing because of
        it) leaves the lease to expire at its time.
        """
        self._stop.set()
        if self._renewer is not None:  # a renewal under way would put the lease back
            self._renewer.join(timeout=self.ttl / 4)  # (one still under way ends as release does)
        until = time.strftime("%H:%M:%S", time.localtime(self._expires))
        if self._expire_only:
            log.warning("writer lease %s left to expire at %s", self.location, until)
            return
        try:
            if self._delete_if_mine():
                log.info("writer lease %s released", self.location)
        except Exception as exc:  # noqa: BLE001 - py4j error from the store
            log.warning(
                "writer lease %s not released (%s); it expires at %s", self.location, exc, until
            )

    def _renew_forever(self) -> None:
        while not self._stop.wait(self.ttl / 4) and self._lost is None:
            self.renew_once()

    def _watch_deadline(self) -> None:
        """Declare the lease lost at its deadline when no renewal came back by then (one may
        be stuck in the store's retries): the ``on_lost`` hook stops the streams."""
        while self._lost is None and not self._stop.is_set():
            wait = min(self.ttl / 4, max(0.0, self._deadline() - time.time()))
            if self._stop.wait(wait):
                return
            self.loss()  # declares the loss once past the deadline

    def renew_once(self) -> None:
        """Renew the lease, or declare it lost (taken by another driver, or unrenewable for
        so long that it may expire before the next attempt)."""
        try:
            holder, etag = _read_tagged(self._fs, self._path)
            if holder is None or holder.get("owner") != self.owner:
                other = "none" if holder is None else holder.get("owner")
                self._lose(f"the writer lease is no longer this driver's (holder: {other})")
                return
            if time.time() >= self._deadline():
                self._lose(f"the writer lease expired before it was renewed{self._why()}")
                return
            expires = time.time() + self.ttl
            content = _content(self.owner, self.ttl, expires, self._notes)
            # over the version just read, ours: a lease another driver put since fails the put
            _write(self._fs, self._path, content, conditional=False, if_match=etag)
            if self._stop.is_set():  # released meanwhile: the put must not bring the lease back
                if not self._expire_only:
                    self._delete_if_mine()
                return
            if self._lost is not None or time.time() >= self._deadline():
                # another driver may have taken it over meanwhile
                self._lose("the writer lease was renewed only after its deadline")
                return
            self._expires, self._renewal_error = expires, ""
        except Exception as exc:  # noqa: BLE001 - py4j error from the store: retried
            self._renewal_error = " ".join(str(exc).split())[:300]
            if time.time() + self.ttl / 4 >= self._expires:
                self._lose(f"the writer lease could not be renewed before it expires ({exc})")
            else:
                log.warning("writer lease %s: renewal failed, retrying: %s", self.location, exc)

    def _delete_if_mine(self) -> bool:
        holder = _read(self._fs, self._path)
        if holder is None or holder.get("owner") != self.owner:
            return False
        self._fs.delete(self._path, False)
        return True

    def _lose(self, why: str) -> None:
        """Declare the lease lost (the first reason stays) and call the hook, once, from
        whichever thread found the loss."""
        with self._losing:
            if self._lost is not None:
                return
            self._lost = f"{why}; this driver stops writing"
        log.error("writer lease %s lost: %s", self.location, why)
        if self.on_lost is not None:
            self.on_lost(self._lost)


def holds_no_lease() -> None:
    """The lease check of a caller that holds none (a local lakehouse): never raises."""


def raise_if_lost(leases: Iterable[WriterLease | None]) -> None:
    """:meth:`WriterLease.raise_if_lost` of each lease held (None: a local lakehouse's)."""
    for lease in leases:
        if lease is not None:
            lease.raise_if_lost()


def take_writer_lease(
    spark: SparkSession,
    root: str,
    name: str,
    on_lost: Callable[[str], None] | None = None,
    ttl: float = LEASE_TTL_SECONDS,
) -> WriterLease | None:
    """The lease ``name`` of the lakehouse at ``root``, valid ``ttl`` seconds after each
    renewal; None for a local lakehouse.

    Raises:
        WriterLeaseError: another driver holds it.
    """
    layout = Layout(root)
    if layout.is_local:
        return None
    return acquire_writer_lease(spark, layout.writer_lease(name), ttl, on_lost)


def stop_streams_on_loss(spark: SparkSession) -> Callable[[str], None]:
    """An ``on_lost`` hook for a streaming job: stop every query of the session (the job then
    ends, and raises through :meth:`WriterLease.raise_if_lost`)."""

    def stop(_why: str) -> None:
        for query in spark.streams.active:
            try:
                query.stop()
            except Exception as exc:  # noqa: BLE001 - stopping the others matters more
                log.warning("could not stop query %s: %s", query.name, exc)

    return stop


def acquire_writer_lease(
    spark: SparkSession,
    location: str,
    ttl: float = LEASE_TTL_SECONDS,
    on_lost: Callable[[str], None] | None = None,
) -> WriterLease:
    """Take the lease at ``location`` (an object-store URI), renewed until released.

    Args:
        on_lost: called once if the lease is lost, from the thread that found the loss (the
            renewing one, its deadline's watcher, or a caller of ``raise_if_lost``).

    Raises:
        WriterLeaseError: another driver holds it and it has not expired.
    """
    _, path, fs = hadoop_path(spark, location)
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    took_over = False
    for _ in range(3):
        expires = time.time() + ttl
        try:
            _write(fs, path, _content(owner, ttl, expires), conditional=True)
            break
        except Exception as exc:  # noqa: BLE001 - py4j error: the lease exists (412) or worse
            holder, etag = _read_tagged(fs, path)
            if holder is None:
                raise  # not a lease held by someone: the write itself failed
            if float(holder.get("expires", 0)) > time.time() and not ended_here(holder):
                raise WriterLeaseError(
                    f"{location}: held by another driver ({holder.get('owner')}) until "
                    f"{time.strftime('%H:%M:%S', time.localtime(float(holder['expires'])))}; "
                    "one driver writes these tables at a time on an object store",
                    holder,
                ) from exc
            log.warning(
                "writer lease %s of %s expired, or its process on this machine ended: taking "
                "it over",
                location,
                holder.get("owner"),
            )
            if etag is not None:  # replace that very version, or fail if another driver did
                if _replaced(fs, path, _content(owner, ttl, expires), etag, owner):
                    break
                continue  # another driver's lease is there now: the next create says whose
            if _read(fs, path) != holder:  # taken over by another driver since it was read
                continue
            fs.delete(path, False)  # a store without etags: delete, create, read back
            took_over = True
    else:
        raise WriterLeaseError(f"{location}: taken over by another driver meanwhile")
    if took_over:
        _confirm_takeover(fs, path, location, owner)
    lease = WriterLease(location, owner, ttl, fs, path, on_lost, expires)
    if took_over:  # the confirmation took a while of the lease's time: renewed from now on
        lease.renew_once()
        lease.raise_if_lost()
    lease._renewer = threading.Thread(target=lease._renew_forever, name="writer-lease", daemon=True)
    lease._renewer.start()
    threading.Thread(target=lease._watch_deadline, name="writer-lease-watch", daemon=True).start()
    log.info("writer lease %s taken (%s)", location, owner)
    return lease


def _confirm_takeover(fs: Any, path: Any, location: str, owner: str) -> None:
    """Read a taken-over lease back after a moment: another driver that found the same expired
    lease may have deleted ours and created its own."""
    time.sleep(TAKEOVER_SETTLE_SECONDS)
    holder = _read(fs, path)
    if holder is None or holder.get("owner") != owner:
        other = "none" if holder is None else holder.get("owner")
        raise WriterLeaseError(f"{location}: taken over by another driver meanwhile ({other})")


def _content(owner: str, ttl: float, expires: float, notes: dict[str, Any] | None = None) -> str:
    lease = {"owner": owner, "expires": expires, "ttl": ttl, **this_process()}
    return json.dumps({**lease, **({"notes": notes} if notes else {})})


def _replaced(fs: Any, path: Any, text: str, etag: str, owner: str) -> bool:
    """Put ``text`` in place of the lease version ``etag``; False when the store refused it
    (another driver's lease replaced that version first)."""
    try:
        _write(fs, path, text, conditional=False, if_match=etag)
    except Exception as exc:  # noqa: BLE001 - py4j error: 412, or the store failed
        holder = _read(fs, path)
        if holder is not None and holder.get("owner") == owner:
            return True  # the put landed; its answer was lost
        log.warning("writer lease %s: not taken over (%s)", path, type(exc).__name__)
        return False
    return True


def _write(
    fs: Any, path: Any, text: str, *, conditional: bool, if_match: str | None = None
) -> None:
    """Put the lease object: ``conditional``, only where none is (``If-None-Match: *``);
    ``if_match``, only over the version of that etag (``If-Match``)."""
    builder = fs.createFile(path).overwrite(not conditional)
    if conditional:
        builder = builder.must(CONDITIONAL_CREATE, True)
    if if_match is not None:
        builder = builder.must(CONDITIONAL_ETAG, if_match)
    out = builder.build()
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()  # S3A puts the object here: a held lease fails the close (HTTP 412)


def _etag(fs: Any, path: Any) -> str | None:
    """The store's etag of the object at ``path`` (None: the store names none)."""
    status = fs.getFileStatus(path)
    try:
        etag = status.getEtag()
    except Exception:  # noqa: BLE001 - py4j: a file status without etags
        return None
    return str(etag) if etag else None


def _read_tagged(fs: Any, path: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The lease and the etag of the version read (None: no lease, or a store that names no
    etags): the etag is taken before and after the read, and read again when another put
    came between.

    Raises:
        WriterLeaseError: the lease was replaced on every look (no version to build on).
    """
    for _ in range(3):
        before = _etag_if_there(fs, path)
        holder = _read(fs, path)
        if holder is None or before is None:
            return holder, None
        if _etag_if_there(fs, path) == before:
            return holder, before
    raise WriterLeaseError(f"{path}: the lease changed on every read (another driver's puts)")


def _etag_if_there(fs: Any, path: Any) -> str | None:
    """:func:`_etag`, None when there is no lease (also deleted since it was looked for)."""
    try:
        return _etag(fs, path)
    except Exception:
        if not fs.exists(path):  # the status call's error: deleted meanwhile
            return None
        raise


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
