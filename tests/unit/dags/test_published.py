"""What the asset events read back say was announced (``protolake_support.published``): per
table of one lakehouse, the version of its newest event (by time, then id); events of other
lakehouses, or whose ``extra`` is not protolake's, are passed over."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from protolake_support.published import _before, announced_in, changed_tables

LAKE = "s3a://bucket/lake"
T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _event(id_: int, seconds: int, **extra: object) -> SimpleNamespace:
    return SimpleNamespace(id=id_, timestamp=T0 + timedelta(seconds=seconds), extra=extra)


def test_the_newest_event_of_each_table_wins_whatever_the_order_read() -> None:
    events = [
        _event(3, 20, lakehouse=LAKE, table="a", delta_version=7),
        _event(1, 10, lakehouse=LAKE, table="a", delta_version=5),
        _event(2, 10, lakehouse=LAKE, table="b", delta_version=1),
        _event(4, 10, lakehouse=LAKE, table="b", delta_version=2),  # same time: the later id
    ]
    latest, through = announced_in(events, LAKE)
    assert latest == {"a": 7, "b": 2}
    assert through == (T0 + timedelta(seconds=20)).isoformat()


def test_other_lakehouses_and_foreign_extras_are_passed_over() -> None:
    events = [
        _event(1, 1, lakehouse="s3a://bucket/other", table="a", delta_version=9),
        _event(2, 2, table="a", delta_version=9),  # no lakehouse: not protolake's
        _event(3, 3, lakehouse=LAKE, table="a", delta_version="9"),
        _event(4, 4, lakehouse=LAKE, table="a", delta_version=True),
        _event(5, 5, lakehouse=LAKE, table=None, delta_version=1),
        SimpleNamespace(id=6, timestamp=T0 + timedelta(seconds=6), extra=None),
    ]
    latest, through = announced_in(events, LAKE)
    assert latest == {}
    assert through == (T0 + timedelta(seconds=6)).isoformat()  # read: not read again
    assert announced_in([], LAKE) == ({}, None)


def test_changed_tables_are_new_ones_and_those_at_another_version() -> None:
    assert changed_tables({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 0}) == ["b", "c"]


def test_events_are_read_again_from_a_while_before_the_newest_read() -> None:
    assert _before("2026-12-01T10:00:00+00:00") == "2026-12-01T09:50:00+00:00"
    # not a time, or a time without its zone (a hand-edited Variable): every event again
    assert _before("yesterday") is None
    assert _before("2026-12-01T10:00:00") is None
