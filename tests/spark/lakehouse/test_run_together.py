"""``lakehouse.streaming.run_together``: a micro-batch's commits at the same time, in threads
that keep the batch thread's Spark properties (a real session, no service)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lakehouse.streaming import run_together


def test_the_tasks_run_at_the_same_time_with_the_callers_spark_properties(spark: Any) -> None:
    sc = spark.sparkContext
    # each task waits for all three: run one after the other, the first would time out
    barrier = threading.Barrier(3, timeout=30)
    seen: list[tuple[str | None, int]] = []

    def task(n: int) -> None:
        barrier.wait()
        rows = spark.range(n).count()  # a Spark job in the task's own thread
        seen.append((sc.getLocalProperty("protolake.test.batch"), rows))

    sc.setLocalProperty("protolake.test.batch", "batch 7")
    try:
        run_together([lambda n=n: task(n) for n in (1, 2, 3)])
    finally:
        sc.setLocalProperty("protolake.test.batch", None)
    assert sorted(seen) == [("batch 7", 1), ("batch 7", 2), ("batch 7", 3)]


def test_every_task_runs_to_its_end_and_the_first_failure_is_raised(spark: Any) -> None:
    finished: list[str] = []
    release = threading.Event()

    def fails() -> None:
        release.set()
        raise ValueError("first table failed")

    def slow() -> None:
        release.wait(30)  # still running when the other task has failed
        finished.append("slow")

    with pytest.raises(ValueError, match="first table failed"):
        run_together([fails, slow])
    assert finished == ["slow"]


def test_one_task_runs_in_the_callers_thread(spark: Any) -> None:
    threads: list[threading.Thread] = []
    run_together([lambda: threads.append(threading.current_thread())])
    assert threads == [threading.current_thread()]
    run_together([])  # nothing to run: nothing happens


def test_the_results_come_back_in_the_order_of_the_tasks(spark: Any) -> None:
    finish_first = threading.Event()

    def late() -> int:
        finish_first.wait(30)  # the later task ends first
        return spark.range(5).count()

    def early() -> str:
        try:
            return f"{spark.range(2).count()} rows"
        finally:
            finish_first.set()

    assert run_together([late, early]) == [5, "2 rows"]
    assert run_together([lambda: 1]) == [1]
    assert run_together([]) == []


def test_the_failure_raised_is_the_first_tasks_whichever_fails_first(spark: Any) -> None:
    second_failed = threading.Event()

    def first() -> None:
        second_failed.wait(30)  # fails after the second task has failed
        raise ValueError("the first task")

    def second() -> None:
        try:
            raise KeyError("the second task")
        finally:
            second_failed.set()

    with pytest.raises(ValueError, match="the first task"):
        run_together([first, second])
