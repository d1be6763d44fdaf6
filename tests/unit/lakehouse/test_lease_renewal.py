"""A writer lease whose renewals fail: retried while the lease is still valid, declared lost
(once, with the store's error) when it could expire before the next attempt; one not renewed
in time, or renewed only after its expiry, is lost; a release waits for a renewal under way;
a takeover never deletes a lease another driver took over meanwhile."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from lakehouse import lease as lease_module
from lakehouse.lease import (
    EXPIRY_MARGIN_SECONDS,
    WriterLease,
    WriterLeaseError,
    acquire_writer_lease,
)


class StoreDown:
    """A Hadoop FileSystem stand-in whose every call fails, as an unreachable store does."""

    def __getattr__(self, name: str) -> object:
        def fail(*_args: object) -> None:
            raise RuntimeError("connect timed out: 127.0.0.1:8333")

        return fail


def test_a_failed_renewal_is_retried_while_the_lease_is_valid_then_the_lease_is_lost() -> None:
    calls: list[str] = []
    ttl = 120.0
    lease = WriterLease("s3a://b/lh/_writers/silver", "me", ttl, StoreDown(), "path")
    lease.on_lost = calls.append
    lease._expires = time.time() + ttl  # just renewed
    lease.renew_once()
    assert lease.loss() is None and calls == []
    lease.raise_if_lost()

    lease._expires = time.time() + ttl / 8  # the next attempt would come too late
    lease.renew_once()
    assert lease.loss() is not None and "could not be renewed before it expires" in lease.loss()
    assert "connect timed out" in lease.loss()
    assert calls == [lease.loss()]
    with pytest.raises(WriterLeaseError, match="s3a://b/lh/_writers/silver: the writer lease"):
        lease.raise_if_lost()


def test_a_hook_set_after_the_loss_is_called_at_once() -> None:
    lease = WriterLease("s3a://b/lh/_writers/bronze", "me", 120.0, StoreDown(), "path")
    lease.renew_once()  # never renewed: expired already
    calls: list[str] = []
    lease.call_on_loss(calls.append)
    assert calls == [lease.loss()] and lease.loss() is not None


def test_a_lease_that_cannot_be_released_is_left_to_expire(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lease = WriterLease("s3a://b/lh/_writers/silver", "me", 120.0, StoreDown(), "path")
    lease.release()  # the job's own failure is what the caller reports, not this one
    assert "not released (connect timed out: 127.0.0.1:8333); it expires at" in caplog.text


class MemoryStore:
    """A Hadoop FileSystem stand-in holding objects in memory, with S3's conditional puts: a
    create that must not overwrite fails on a held object, a put with an etag fails unless the
    object is still that version (``etags=False``: a store whose file statuses name no etag).
    ``write_seconds`` delays each put, as a store's retries do; ``after_read`` runs after each
    read (numbered), ``before_change`` before each put or delete lands (numbered)."""

    def __init__(self, etags: bool = True) -> None:
        self.objects: dict[str, bytes] = {}
        self.versions: dict[str, int] = {}
        self.etags = etags
        self.write_seconds = 0.0
        self.after_read: Callable[[int], None] = lambda _n: None
        self.before_change: Callable[[int], None] = lambda _n: None
        self.reads = self.changes = 0

    def put(self, path: str, data: bytes) -> None:
        self.objects[path] = data
        self.versions[path] = self.versions.get(path, 0) + 1

    def etag(self, path: str) -> str:
        return f'"v{self.versions[path]}"'

    def exists(self, path: str) -> bool:
        return path in self.objects

    def getFileStatus(self, path: str) -> Any:  # noqa: N802 - Hadoop's name
        if path not in self.objects:
            raise FileNotFoundError(path)

        def get_etag() -> str:
            if not self.etags:
                raise RuntimeError("py4j: no method getEtag")
            return self.etag(path)

        return SimpleNamespace(getEtag=get_etag)

    def open(self, path: str) -> Any:
        data = self.objects[path]
        self.reads += 1
        self.after_read(self.reads)
        return SimpleNamespace(readAllBytes=lambda: data, close=lambda: None)

    def delete(self, path: str, _recursive: bool) -> bool:
        self.changes += 1
        self.before_change(self.changes)
        return self.objects.pop(path, None) is not None

    def createFile(self, path: str) -> Any:  # noqa: N802 - Hadoop's name
        store, chunks = self, []
        options: dict[str, Any] = {"overwrite": True}

        class Builder:
            def overwrite(self, value: bool) -> Builder:
                options["overwrite"] = value
                return self

            def must(self, key: str, value: object) -> Builder:
                options[key] = value
                return self

            def build(self) -> Any:
                def close() -> None:
                    time.sleep(store.write_seconds)
                    store.changes += 1
                    store.before_change(store.changes)
                    if not options["overwrite"] and path in store.objects:
                        raise RuntimeError("412 Precondition Failed")
                    etag = options.get("fs.option.create.conditional.overwrite.etag")
                    if etag is not None and (path not in store.objects or store.etag(path) != etag):
                        raise RuntimeError("412 Precondition Failed (If-Match)")
                    store.put(path, b"".join(chunks))

                return SimpleNamespace(write=lambda b: chunks.append(bytes(b)), close=close)

        return Builder()

    def holder(self, path: str) -> str | None:
        data = self.objects.get(path)
        return None if data is None else json.loads(data)["owner"]


def _held(store: MemoryStore, owner: str, expires: float, ttl: float = 120.0) -> WriterLease:
    store.put("lease", json.dumps({"owner": owner, "expires": expires}).encode())
    return WriterLease("s3a://b/lh/_writers/silver", owner, ttl, store, "lease", None, expires)


def test_a_lease_not_renewed_in_time_is_lost_while_its_renewal_hangs() -> None:
    """No renewal came back (one may be stuck in the store's retries): once within the margin
    of its expiry, the lease is lost, and the writer's next check stops it."""
    lease = _held(MemoryStore(), "me", time.time() + EXPIRY_MARGIN_SECONDS + 5)
    calls: list[str] = []
    lease.call_on_loss(calls.append)
    assert lease.loss() is None
    lease._expires = time.time() + EXPIRY_MARGIN_SECONDS - 1
    with pytest.raises(WriterLeaseError, match="not renewed before its expiry"):
        lease.raise_if_lost()
    assert calls == [lease.loss()]
    with pytest.raises(WriterLeaseError):
        lease.raise_if_lost()
    assert len(calls) == 1  # the hook is called once, however often the lease is asked


def test_a_renewal_the_store_completes_after_the_deadline_is_a_loss() -> None:
    """The put may have replaced a lease another driver took over meanwhile."""
    store = MemoryStore()
    lease = _held(store, "me", time.time() + 0.6, ttl=1.6)  # its deadline 0.2 s before
    store.write_seconds = 0.5
    lease.renew_once()
    assert lease.loss() is not None and "renewed only after its deadline" in lease.loss()


def test_a_renewal_stuck_in_the_store_loses_the_lease_at_its_deadline() -> None:
    """The deadline's watcher calls the hook (the streams stop there) while the renewal is
    still stuck in the store's retries."""
    store = MemoryStore()
    lease = _held(store, "me", time.time() + 0.6, ttl=1.6)
    calls: list[str] = []
    lease.on_lost = calls.append
    store.write_seconds = 3.0
    renewal = threading.Thread(target=lease.renew_once)
    watcher = threading.Thread(target=lease._watch_deadline)
    renewal.start()
    watcher.start()
    watcher.join(timeout=2.0)
    assert renewal.is_alive() and not watcher.is_alive()  # lost before the put came back
    assert len(calls) == 1 and "not renewed before its expiry" in calls[0]
    renewal.join()
    assert len(calls) == 1


@pytest.mark.parametrize("expire_only", [False, True])
def test_a_renewal_that_comes_back_after_the_release_deletes_what_it_put(
    expire_only: bool,
) -> None:
    """...unless the lease is to expire only (a thread of the driver may still commit)."""
    store = MemoryStore()
    lease = _held(store, "me", time.time() + 0.8, ttl=0.8)  # the release waits 0.2 s at most
    store.write_seconds = 0.6
    if expire_only:
        lease.expire_only()
    lease._renewer = threading.Thread(target=lease.renew_once)
    lease._renewer.start()
    time.sleep(0.05)  # the renewal has read the lease and is putting it
    lease.release()
    assert lease._renewer.is_alive()  # the release did not wait for it
    lease._renewer.join()
    assert store.holder("lease") == ("me" if expire_only else None)


def test_release_waits_for_a_renewal_under_way() -> None:
    """A renewal put that lands after the release's delete would hold the lease until it
    expires, refusing the next job meanwhile."""
    store = MemoryStore()
    lease = _held(store, "me", time.time() + 120)
    store.write_seconds = 0.5
    lease._renewer = threading.Thread(target=lease.renew_once)
    lease._renewer.start()
    time.sleep(0.1)  # the renewal has read the lease and is putting it
    lease.release()
    assert "lease" not in store.objects


@pytest.mark.parametrize("etags", [True, False])
def test_a_takeover_leaves_a_lease_taken_over_since_it_was_read(
    monkeypatch: pytest.MonkeyPatch, etags: bool
) -> None:
    """Two drivers find one expired lease; the other takes it over while this one decides:
    this one must not delete the other's fresh lease."""
    store = MemoryStore(etags)
    _held(store, "dead", time.time() - 10)

    def other_takes_over(n: int) -> None:
        if n == 1:  # once this driver read the expired lease, before it deletes it
            _held(store, "other", time.time() + 120)

    store.after_read = other_takes_over
    monkeypatch.setattr(lease_module, "hadoop_path", lambda _spark, _loc: (None, "lease", store))
    monkeypatch.setattr(lease_module, "TAKEOVER_SETTLE_SECONDS", 0.0)
    with pytest.raises(WriterLeaseError, match=r"held by another driver \(other\)"):
        acquire_writer_lease(None, "s3a://b/lh/_writers/silver")  # type: ignore[arg-type]
    assert store.holder("lease") == "other"


def test_of_two_drivers_taking_over_one_expired_lease_the_one_that_stalled_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """This driver read the expired lease, then stalled before its put (a GC pause, the
    store's retries) while the other took the lease over and began writing: this one's put
    over the version it read is refused, whatever the stall's length."""
    store = MemoryStore()
    _held(store, "dead", time.time() - 10)
    monkeypatch.setattr(lease_module, "hadoop_path", lambda _spark, _loc: (None, "lease", store))
    other: list[WriterLease] = []

    monkeypatch.setattr(lease_module, "TAKEOVER_SETTLE_SECONDS", 0.0)

    def the_other_takes_over_first(n: int) -> None:
        if n == 2:  # this driver's first change after its failed create, held up
            store.before_change = lambda _n: None
            other.append(acquire_writer_lease(None, "s3a://b/lh/_writers/silver"))  # type: ignore[arg-type]

    store.before_change = the_other_takes_over_first
    try:
        with pytest.raises(WriterLeaseError, match=r"held by another driver"):
            acquire_writer_lease(None, "s3a://b/lh/_writers/silver")  # type: ignore[arg-type]
        (theirs,) = other
        assert store.holder("lease") == theirs.owner and theirs.loss() is None
        theirs.renew_once()  # its renewals build on its own version
        assert theirs.loss() is None and store.holder("lease") == theirs.owner
    finally:
        for lease in other:
            lease.release()


def test_a_renewal_never_replaces_a_lease_another_driver_put() -> None:
    store = MemoryStore()
    lease = _held(store, "me", time.time() + 120)

    def other_puts_its_own(n: int) -> None:
        if n == 1:  # after the renewal read our lease, before its put
            store.put("lease", json.dumps({"owner": "other", "expires": 1e12}).encode())

    store.after_read = other_puts_its_own
    lease.renew_once()  # the put over our version is refused: the other's lease stays
    assert store.holder("lease") == "other"
    lease.renew_once()
    assert lease.loss() is not None and "no longer this driver's (holder: other)" in lease.loss()


def test_a_lease_whose_process_on_this_machine_ended_is_taken_over_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A restart after a crash on the same machine: the lease has a minute to go, but its
    process is gone; a live process's lease, or another machine's, is refused."""
    import subprocess
    import sys

    from lakehouse.local_process import this_process

    crashed, its_jvm = (subprocess.Popen([sys.executable, "-c", "pass"]) for _ in range(2))
    crashed.wait()
    its_jvm.wait()
    store = MemoryStore()
    monkeypatch.setattr(lease_module, "hadoop_path", lambda _spark, _loc: (None, "lease", store))
    location = "s3a://b/lh/_writers/bronze"

    def held_by(**fields: object) -> None:
        lease = {"owner": "crashed", "expires": time.time() + 60, **this_process()}
        lease.update(parent_pid=its_jvm.pid, **fields)
        store.put("lease", json.dumps(lease).encode())

    held_by(pid=os.getppid())  # alive
    with pytest.raises(WriterLeaseError, match=r"held by another driver \(crashed\)"):
        acquire_writer_lease(None, location)  # type: ignore[arg-type]
    held_by(pid=crashed.pid, host="elsewhere")
    with pytest.raises(WriterLeaseError, match=r"held by another driver \(crashed\)"):
        acquire_writer_lease(None, location)  # type: ignore[arg-type]
    held_by(pid=crashed.pid)
    lease = acquire_writer_lease(None, location)  # type: ignore[arg-type]
    try:
        assert store.holder("lease") == lease.owner and lease.loss() is None
        assert json.loads(store.objects["lease"])["pid"] == os.getpid()
    finally:
        lease.release()


def test_a_renewal_whose_answer_was_lost_is_followed_by_one_that_succeeds() -> None:
    """The store took the put but its answer never came (or the read after it failed): the
    next renewal builds on the version the store holds, ours, and goes through."""
    store = MemoryStore()
    lease = _held(store, "me", time.time() + 120)
    real_put = store.put

    def put_then_fail(path: str, data: bytes) -> None:
        real_put(path, data)
        store.put = real_put  # once
        raise RuntimeError("connection reset: the put's answer was lost")

    store.put = put_then_fail  # type: ignore[method-assign]
    lease.renew_once()
    assert lease.loss() is None and "answer was lost" in lease._renewal_error
    before = lease._expires
    lease.renew_once()
    assert lease.loss() is None and lease._renewal_error == "" and lease._expires > before
    assert store.holder("lease") == "me"


def test_a_lease_replaced_on_every_look_is_never_put_over_blindly() -> None:
    """Another driver puts the lease between each look of a renewal: no version to build on,
    so the renewal fails (and is retried) instead of putting without a condition."""
    store = MemoryStore()
    lease = _held(store, "me", time.time() + 120)

    def another_put(_n: int) -> None:
        store.put("lease", json.dumps({"owner": "me", "expires": 1e12, "n": _n}).encode())

    store.after_read = another_put
    puts = store.changes
    lease.renew_once()
    assert store.changes == puts  # no put of this renewal
    assert "changed on every read" in lease._renewal_error and lease.loss() is None


def test_notes_go_out_with_the_next_renewal_and_reach_a_refused_driver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryStore()
    lease = _held(store, "me", time.time() + 120)
    lease.note("maintenance", {"groups": ["bronze"], "last_pass": 12.5})
    assert "notes" not in json.loads(store.objects["lease"])  # not before the renewal
    lease.renew_once()
    assert json.loads(store.objects["lease"])["notes"] == {
        "maintenance": {"groups": ["bronze"], "last_pass": 12.5}
    }
    monkeypatch.setattr(lease_module, "hadoop_path", lambda _spark, _loc: (None, "lease", store))
    with pytest.raises(WriterLeaseError, match=r"held by another driver \(me\)") as refused:
        acquire_writer_lease(None, "s3a://b/lh/_writers/bronze")  # type: ignore[arg-type]
    assert refused.value.holder is not None
    assert refused.value.holder["notes"]["maintenance"]["groups"] == ["bronze"]
    assert refused.value.holder["owner"] == "me"


def test_a_lease_to_expire_only_is_not_deleted_at_its_release() -> None:
    store = MemoryStore()
    lease = _held(store, "me", time.time() + 120)
    lease.note("maintenance", {"groups": ["bronze"]})
    lease.note("maintenance", None)
    lease.renew_once()
    assert "notes" not in json.loads(store.objects["lease"])  # taken out again
    lease.expire_only()  # e.g. a maintenance pass that may still commit
    lease.release()
    assert store.holder("lease") == "me"
