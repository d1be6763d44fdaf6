"""A writer lease whose renewals fail: retried while the lease is still valid, declared lost
(once, with the store's error) when it could expire before the next attempt."""

from __future__ import annotations

import time

import pytest

from lakehouse.lease import WriterLease, WriterLeaseError


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
    assert lease.lost is None and calls == []
    lease.raise_if_lost()

    lease._expires = time.time() + ttl / 8  # the next attempt would come too late
    lease.renew_once()
    assert lease.lost is not None and "could not be renewed before it expires" in lease.lost
    assert "connect timed out" in lease.lost
    assert calls == [lease.lost]
    with pytest.raises(WriterLeaseError, match="s3a://b/lh/_writers/silver: the writer lease"):
        lease.raise_if_lost()


def test_a_hook_set_after_the_loss_is_called_at_once() -> None:
    lease = WriterLease("s3a://b/lh/_writers/bronze", "me", 120.0, StoreDown(), "path")
    lease.renew_once()  # never renewed: expired already
    calls: list[str] = []
    lease.call_on_loss(calls.append)
    assert calls == [lease.lost] and lease.lost is not None


def test_a_lease_that_cannot_be_released_is_left_to_expire(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lease = WriterLease("s3a://b/lh/_writers/silver", "me", 120.0, StoreDown(), "path")
    lease.release()  # the job's own failure is what the caller reports, not this one
    assert "not released (connect timed out: 127.0.0.1:8333); it expires at" in caplog.text
