"""The stream runner's pure parts: triggers, awaiting queries and groups, signal handlers, the
table watcher on local folders (delta-rs, no JVM)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lakehouse.streaming import (
    TRIGGERS,
    QueryGroup,
    TableWatcher,
    await_queries,
    stop_on_signals,
    with_trigger,
)


class FakeWriter:
    def __init__(self) -> None:
        self.triggers: list[dict[str, Any]] = []

    def trigger(self, **kwargs: Any) -> FakeWriter:
        self.triggers.append(kwargs)
        return self


class FakeQuery:
    def __init__(self, polls: int, error: Exception | None = None) -> None:
        self.polls = polls
        self.error = error
        self.waited = 0
        self.name = "q"

    def awaitTermination(self, seconds: int) -> bool:  # noqa: N802 - Spark's name
        self.waited += 1
        return self.waited > self.polls

    def exception(self) -> Exception | None:
        return self.error


def test_the_two_triggers() -> None:
    assert TRIGGERS == ("available-now", "processing-time")
    assert with_trigger(FakeWriter(), "available-now", "9 s").triggers == [{"availableNow": True}]
    assert with_trigger(FakeWriter(), "processing-time", "9 s").triggers == [
        {"processingTime": "9 s"}
    ]
    with pytest.raises(ValueError, match="trigger: must be one of available-now, processing-time"):
        with_trigger(FakeWriter(), "once", "9 s")


def test_await_polls_until_every_query_ended_and_raises_the_first_failure() -> None:
    done, other = FakeQuery(polls=3), FakeQuery(polls=0)
    await_queries([done, other])
    assert (done.waited, other.waited) == (4, 1)
    with pytest.raises(RuntimeError, match="boom"):
        await_queries([FakeQuery(polls=1, error=RuntimeError("boom")), FakeQuery(polls=0)])


def test_signal_handlers_are_installed_only_from_the_main_thread() -> None:
    events: list[threading.Event] = []
    thread = threading.Thread(target=lambda: events.append(stop_on_signals([FakeQuery(0)])))
    thread.start()
    thread.join()
    assert not events[0].is_set()


class LiveQuery:
    """A query that runs until stopped, or fails after ``fail_after`` polls."""

    def __init__(self, name: str = "q", fail_after: int | None = None) -> None:
        self.name = name
        self.fail_after = fail_after
        self.polls = 0
        self.stopped = False
        self.error: Exception | None = None

    @property
    def isActive(self) -> bool:  # noqa: N802 - Spark's name
        return not self.stopped and self.error is None

    def awaitTermination(self, seconds: float) -> bool:  # noqa: N802
        self.polls += 1
        if self.fail_after is not None and self.polls >= self.fail_after:
            self.error = RuntimeError(f"{self.name} failed")
        return not self.isActive

    def exception(self) -> Exception | None:
        return self.error

    def stop(self) -> None:
        self.stopped_in = threading.current_thread()
        self.stopped = True


def test_a_group_ends_when_it_stops_growing_and_every_query_ended() -> None:
    first = LiveQuery("first")
    group = QueryGroup([first], growing=True)
    waiter = threading.Thread(target=group.await_all, kwargs={"poll_seconds": 0.01})
    waiter.start()
    late = LiveQuery("late")
    assert group.add(late)
    first.stop()
    waiter.join(0.3)
    assert waiter.is_alive()  # still growing, and `late` runs
    group.done_growing()
    late.stop()
    waiter.join(5)
    assert not waiter.is_alive()
    assert group.queries == [first, late]


def test_a_failing_query_that_is_not_the_first_stops_the_others_and_is_raised() -> None:
    steady, failing = LiveQuery("steady"), LiveQuery("failing")
    group = QueryGroup([steady, failing])
    failing.error = RuntimeError("failing failed")
    with pytest.raises(RuntimeError, match="failing failed"):
        group.await_all(poll_seconds=0.01)
    assert steady.stopped


def test_a_failure_of_what_grows_the_group_is_raised_and_stops_everything() -> None:
    query, hooks = LiveQuery(), []
    group = QueryGroup([query], growing=True)
    group.on_stop(lambda: hooks.append("watcher stopped"))
    group.fail(OSError("bronze/ unreadable"))
    with pytest.raises(OSError, match="unreadable"):
        group.await_all(poll_seconds=0.01)
    assert query.stopped and hooks == ["watcher stopped"]
    late = LiveQuery()
    assert not group.add(late) and late.stopped  # a stopped group takes no new query


def test_signals_stop_a_group() -> None:
    query = LiveQuery()
    group = QueryGroup([query], growing=True)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        requested = stop_on_signals(group, "job")
        os.kill(os.getpid(), signal.SIGTERM)
        assert requested.wait(5)
        assert _wait(lambda: query.stopped)
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    assert group.stopping
    # stopped from a thread of its own: the main thread was inside a JVM call when the signal
    # came, and its Py4J connection cannot take another one
    assert query.stopped_in is not threading.main_thread()
    group.await_all(poll_seconds=0.01)  # returns: stopped, no failure


def test_signals_stop_listed_queries_from_another_thread() -> None:
    queries = [LiveQuery("a"), LiveQuery("b")]
    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        requested = stop_on_signals(queries, "job")
        os.kill(os.getpid(), signal.SIGINT)
        assert requested.wait(5)
        assert _wait(lambda: all(q.stopped for q in queries))
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
    assert all(q.stopped_in is not threading.main_thread() for q in queries)
    await_queries(queries)  # returns: every query ended


def _signalled(queries: Any, signum: int = signal.SIGTERM) -> Any:
    """stop_on_signals over ``queries``, then ``signum`` to this process; the request once
    the stop thread has stopped every query."""
    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    listed = queries.queries if isinstance(queries, QueryGroup) else queries
    try:
        requested = stop_on_signals(queries, "job")
        os.kill(os.getpid(), signum)
        assert requested.wait(5)
        assert _wait(lambda: all(q.stopped for q in listed))
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
    return requested


def test_a_stop_explains_the_failures_it_causes_but_not_one_met_before() -> None:
    assert _signalled([LiveQuery("a")]).explains_failure()
    assert _signalled(QueryGroup([LiveQuery("a")], growing=True)).explains_failure()

    failed = LiveQuery("failed")
    failed.error = RuntimeError("registry down")
    before = _signalled([LiveQuery("a"), failed])
    assert before.is_set() and not before.explains_failure()
    assert before.failed_before is failed.error

    group = QueryGroup([LiveQuery("a")], growing=True)
    group.fail(OSError("bronze/ unreadable"))
    in_group = _signalled(group, signal.SIGINT)
    assert not in_group.explains_failure()
    assert isinstance(in_group.failed_before, OSError)


class SlowToRead(LiveQuery):
    """A query whose state takes a while to read (a loaded JVM)."""

    def exception(self) -> Exception | None:
        time.sleep(0.3)
        return self.error


def test_a_stop_is_not_taken_for_a_failure_the_stop_thread_has_yet_to_see() -> None:
    failed = SlowToRead("failed")
    failed.error = RuntimeError("registry down")
    previous = signal.getsignal(signal.SIGTERM)
    try:
        requested = stop_on_signals([failed], "job")
        os.kill(os.getpid(), signal.SIGTERM)
        assert requested.wait(5)
        # asked at once, as a caller whose await ended with the failure does
        assert not requested.explains_failure()
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    assert requested.failed_before is failed.error


def _delta_table(path: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(str(path), pa.table({"x": [1]}))


def _wait(predicate: Any, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_the_watcher_calls_back_once_per_table_as_tables_appear(tmp_path: Path) -> None:
    folder = tmp_path / "bronze"
    seen: list[str] = []
    watcher = TableWatcher(None, str(folder), seen.append, 0.05)
    assert watcher.poll() == []  # the folder does not exist yet: nothing, no error
    _delta_table(folder / "a")
    (folder / "not_a_table").mkdir()
    assert watcher.poll() == [f"{folder}/a"]
    watcher.start()
    try:
        _delta_table(folder / "b")
        assert _wait(lambda: len(seen) == 2), seen
        time.sleep(0.2)  # more polls call back no more
    finally:
        watcher.stop()
    assert seen == [f"{folder}/a", f"{folder}/b"]


def test_a_watcher_of_named_tables_ends_once_it_has_seen_them(tmp_path: Path) -> None:
    folder, seen, done = tmp_path / "bronze", [], threading.Event()
    _delta_table(folder / "other")
    watcher = TableWatcher(None, str(folder), seen.append, 0.05, names={"wanted"}, on_done=done.set)
    assert watcher.poll() == [] and not watcher.complete
    watcher.start()
    _delta_table(folder / "wanted")
    assert done.wait(10)
    assert watcher.complete and seen == [f"{folder}/wanted"]


def test_a_callback_that_fails_goes_to_on_error_and_ends_the_watcher(tmp_path: Path) -> None:
    folder, errors = tmp_path / "bronze", []

    def refuse(path: str) -> None:
        raise ValueError(f"cannot start {path}")

    watcher = TableWatcher(None, str(folder), refuse, 0.05, on_error=errors.append)
    watcher.start()
    _delta_table(folder / "a")
    assert _wait(lambda: bool(errors))
    assert "cannot start" in str(errors[0])
