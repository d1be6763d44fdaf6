"""The stream runner's pure parts: triggers, awaiting queries, signal handlers (no JVM)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lakehouse.streaming import TRIGGERS, await_queries, stop_on_signals, with_trigger


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
