"""When ``protolake maintain`` steps aside for the stream holding a group's writer lease
(:func:`pipelines.stream_maintenance.maintained_by_holder`): only for a stream that keeps that
group, whose passes are on time and did not fail; and which streams keep their tables."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pipelines.settings import parse_config
from pipelines.stream_maintenance import (
    GRACE_SECONDS,
    NOTE,
    maintained_by_holder,
    start_maintainer,
)


def _holder(**note: Any) -> dict[str, Any]:
    base = {"groups": ["silver", "quarantine", "quality"], "interval_seconds": 3600.0}
    return {"owner": "host:1:ab", "notes": {NOTE: {**base, **note}}}


def test_a_stream_with_a_pass_on_time_keeps_its_groups() -> None:
    holder = _holder(since=time.time() - 7200, last_pass=time.time() - 60, failed=[])
    for group in ("silver", "quarantine", "quality"):
        why = maintained_by_holder(holder, group)
        assert why is not None and "host:1:ab" in why and "every 60 min" in why
    assert maintained_by_holder(holder, "bronze") is None  # not one of its groups


def test_a_stream_before_its_first_pass_keeps_them_for_one_interval() -> None:
    assert maintained_by_holder(_holder(since=time.time() - 60, last_pass=None), "silver")
    late = time.time() - 3600 - GRACE_SECONDS - 60
    assert maintained_by_holder(_holder(since=late, last_pass=None), "silver") is None


@pytest.mark.parametrize(
    "note",
    [
        {"last_pass": time.time() - 3600 - GRACE_SECONDS - 60, "failed": []},  # late
        {"last_pass": time.time(), "failed": [{"table": "t", "error": "boom"}]},  # failed
    ],
)
def test_a_late_or_failed_pass_does_not_count(note: dict[str, Any]) -> None:
    assert maintained_by_holder(_holder(since=time.time() - 9000, **note), "silver") is None


def test_a_driver_that_publishes_no_maintenance_keeps_nothing() -> None:
    assert maintained_by_holder({"owner": "x", "expires": 1e12}, "bronze") is None
    assert maintained_by_holder(None, "bronze") is None
    assert maintained_by_holder({"notes": {NOTE: "not a note"}}, "bronze") is None


def test_only_a_processing_time_stream_holding_a_lease_maintains() -> None:
    raw = {"lakehouse": {"path": "/tmp/lh"}, "kafka": {"bootstrap_servers": "x:1", "topics": ["t"]}}
    cfg = parse_config(raw)
    lease: Any = object()
    # a local lakehouse (no lease), an available-now run, or maintenance turned off: none
    assert start_maintainer(None, cfg, "bronze", "processing-time", None, lambda: True) is None  # type: ignore[arg-type]
    assert start_maintainer(None, cfg, "bronze", "available-now", lease, lambda: True) is None  # type: ignore[arg-type]
    off = parse_config({**raw, "maintenance": {"stream_optimize_minutes": 0}})
    assert start_maintainer(None, off, "bronze", "processing-time", lease, lambda: True) is None  # type: ignore[arg-type]
