"""When ``protolake maintain`` steps aside for the stream holding a group's writer lease
(:func:`pipelines.stream_maintenance.stream_keeps`): only for a stream that keeps that group
as asked, its passes on time and none failed; which streams keep their tables; and a
maintainer's note in the lease, there while it runs and gone when it stops."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from lakehouse.lease import WriterLeaseError
from pipelines.settings import parse_config
from pipelines.stream_maintenance import (
    GRACE_SECONDS,
    NOTE,
    StreamMaintainer,
    start_maintainer,
    stream_keeps,
)

RAW = {"lakehouse": {"path": "/tmp/lh"}, "kafka": {"bootstrap_servers": "x:1", "topics": ["t"]}}
HOUR = 3600.0


def _holder(**note: Any) -> dict[str, Any]:
    base = {
        "groups": ["silver", "quarantine", "quality"],
        "interval_seconds": HOUR,
        "vacuum_every_seconds": 24 * HOUR,
        "retention_hours": 168.0,
        "since": time.time() - 2 * HOUR,
        "last_pass": time.time() - 60,
        "last_vacuum": time.time() - HOUR,
        "failed": [],
    }
    return {"owner": "host:1:ab", "notes": {NOTE: {**base, **note}}}


def _keeps(holder: dict[str, Any] | None, group: str = "silver", **asked: Any) -> Any:
    return stream_keeps(holder, group, **{"retention_hours": 168.0, "vacuum": True, **asked})


def test_a_stream_with_passes_on_time_keeps_its_groups() -> None:
    for group in ("silver", "quarantine", "quality"):
        kept, why = _keeps(_holder(), group)
        assert kept and "host:1:ab" in why and "every 60 min" in why
    assert _keeps(_holder(), "bronze") is None  # not one of its groups


def test_a_stream_before_its_first_pass_keeps_them_for_one_interval() -> None:
    fresh = _holder(since=time.time() - 60, last_pass=None, last_vacuum=None)
    assert _keeps(fresh)[0]
    late = time.time() - HOUR - GRACE_SECONDS - 60
    kept, why = _keeps(_holder(since=late, last_pass=None, last_vacuum=None))
    assert not kept and "is late" in why


@pytest.mark.parametrize(
    ("note", "asked", "why"),
    [
        ({"last_pass": time.time() - HOUR - GRACE_SECONDS - 60}, {}, "pass"),
        ({"failed": [{"table": "t", "error": "boom"}]}, {}, "failed: boom"),
        ({"vacuum_every_seconds": 0.0}, {}, "does not VACUUM"),
        ({}, {"retention_hours": 720.0}, "keeping 168 h, not 720 h"),
        ({"last_vacuum": time.time() - 26 * HOUR - GRACE_SECONDS}, {}, "last VACUUM"),
    ],
)
def test_a_stream_that_does_not_keep_a_group_as_asked_says_why(
    note: dict[str, Any], asked: dict[str, Any], why: str
) -> None:
    kept, reason = _keeps(_holder(**note), **asked)
    assert not kept and why in reason


def test_a_vacuum_due_runs_with_the_next_pass_and_is_not_late_till_then() -> None:
    # due after 24 h, run by the pass that comes up to an interval (1 h) later
    assert _keeps(_holder(last_vacuum=time.time() - 25 * HOUR - GRACE_SECONDS + 60))[0]


def test_without_vacuum_asked_its_vacuum_does_not_matter() -> None:
    assert _keeps(_holder(vacuum_every_seconds=0.0), vacuum=False)[0]
    assert _keeps(_holder(), retention_hours=720.0, vacuum=False)[0]


def test_a_driver_that_publishes_no_maintenance_keeps_nothing() -> None:
    assert _keeps({"owner": "x", "expires": 1e12}) is None
    assert _keeps(None) is None
    assert _keeps({"notes": {NOTE: "not a note"}}) is None


class _Lease:
    """The part of a ``WriterLease`` a maintainer uses."""

    location = "s3a://b/lh/_writers/bronze"
    released = False

    def __init__(self) -> None:
        self.notes: dict[str, Any] = {}

    def note(self, key: str, value: Any) -> None:
        self.notes.pop(key, None) if value is None else self.notes.update({key: value})

    def loss(self) -> None:
        return None


def test_a_maintainer_notes_itself_while_it_runs_and_only_where_a_lease_is_held() -> None:
    cfg = parse_config(RAW)
    cancelled: list[str] = []
    spark: Any = SimpleNamespace(
        sparkContext=SimpleNamespace(
            setJobGroup=lambda *a, **k: None, cancelJobGroup=cancelled.append
        )
    )
    lease: Any = _Lease()
    started = start_maintainer(spark, cfg, "silver", "processing-time", lease, lambda: True)
    assert started is not None
    note = lease.notes[NOTE]
    assert note["groups"] == ["silver", "quarantine", "quality"]
    assert (note["interval_seconds"], note["vacuum_every_seconds"]) == (3600.0, 86400.0)
    assert note["retention_hours"] == 168.0 and note["last_pass"] is None
    assert [t for t in threading.enumerate() if t.name == "silver-maintenance"]
    assert started.stop(timeout=10)
    assert [c.startswith("protolake-silver-maintenance-") for c in cancelled] == [True]
    assert NOTE not in lease.notes  # a stopped maintainer keeps nothing
    # a local lakehouse (no lease), an available-now run, or maintenance turned off: none
    assert start_maintainer(spark, cfg, "bronze", "processing-time", None, lambda: True) is None
    assert start_maintainer(spark, cfg, "bronze", "available-now", lease, lambda: True) is None
    off = parse_config({**RAW, "maintenance": {"stream_optimize_minutes": 0}})
    assert start_maintainer(spark, off, "bronze", "processing-time", lease, lambda: True) is None


def test_a_pass_cut_short_by_the_stop_publishes_no_failure(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = parse_config(RAW)
    spark: Any = SimpleNamespace(sparkContext=SimpleNamespace(cancelJobGroup=lambda _g: None))
    lease: Any = _Lease()
    maintainer = StreamMaintainer(spark, cfg, "silver", lease)
    groups: list[str] = []

    def maintain_then_stop(group: str, _vacuum: bool) -> list[dict[str, str]]:
        groups.append(group)
        maintainer.stop()  # e.g. SIGTERM while the first group's tables are maintained
        raise WriterLeaseError("s3a://b/lh/_writers/silver: the job is stopping")

    monkeypatch.setattr(maintainer, "_maintain", maintain_then_stop)
    with caplog.at_level("WARNING", logger="pipelines.stream_maintenance"):
        status = maintainer.run_pass()
    assert groups == ["silver"]  # no group started after the stop
    assert status["last_pass"] is None and status["failed"] == []
    assert not caplog.records and NOTE not in lease.notes


def test_a_failed_pass_is_published_with_its_reason() -> None:
    cfg = parse_config(RAW)
    lease: Any = _Lease()
    maintainer = StreamMaintainer(None, cfg, "bronze", lease)  # type: ignore[arg-type]

    def fail(_group: str, _vacuum: bool) -> list[dict[str, str]]:
        raise RuntimeError()  # no message: the reason is its type

    maintainer._maintain = fail  # type: ignore[method-assign]
    status = maintainer.run_pass()
    assert status["failed"] == [{"table": "bronze", "error": "RuntimeError"}]
    assert lease.notes[NOTE]["failed"] == status["failed"] and status["last_pass"] is not None
    assert status["last_vacuum"] is None  # a VACUUM due but failed stays due
