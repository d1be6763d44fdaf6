"""Which Delta commit failures are retried: races with a concurrent commit, and nothing else."""

from __future__ import annotations

import pytest
from delta.exceptions import base as delta_errors
from deltalake.exceptions import CommitFailedError

from lakehouse.delta import is_delta_conflict, retry_conflicts

APPEND_TEXT = (
    "[DELTA_CONCURRENT_APPEND.WITHOUT_HINT] Transaction conflict detected. a concurrent WRITE "
    "added files to the table"
)


@pytest.mark.parametrize(
    "exc",
    [
        # what pyspark raises once delta.exceptions converted the Java exception: the text
        # names the condition, not the class (CI saw exactly this escape the retry)
        delta_errors.ConcurrentAppendException(APPEND_TEXT),
        delta_errors.ConcurrentTransactionException("[DELTA_CONCURRENT_TRANSACTION] x"),
        delta_errors.MetadataChangedException("[DELTA_METADATA_CHANGED] x"),
        # an unconverted Py4J error names the Java class
        RuntimeError("io.delta.exceptions.ConcurrentAppendException: Files were added"),
        RuntimeError(APPEND_TEXT),
        # delta-rs (quality results are committed through it): a lost race
        CommitFailedError("Commit failed: a concurrent transaction deleted the same data"),
    ],
)
def test_conflicts_are_recognised_by_class_condition_or_text(exc):
    assert is_delta_conflict(exc)


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("boom"),
        RuntimeError("[DELTA_TABLE_NOT_FOUND] no table"),
        RuntimeError("Concurrent modification of the config"),  # not a Delta race
    ],
)
def test_other_errors_are_not_conflicts(exc):
    assert not is_delta_conflict(exc)


def test_a_conflict_is_retried_until_it_commits(monkeypatch):
    monkeypatch.setattr("lakehouse.delta.time.sleep", lambda s: None)
    calls = []

    def commit():
        calls.append(1)
        if len(calls) < 3:
            raise delta_errors.ConcurrentAppendException(APPEND_TEXT)

    retry_conflicts(commit, "a test commit")
    assert len(calls) == 3


def test_other_errors_and_the_last_attempt_raise(monkeypatch):
    monkeypatch.setattr("lakehouse.delta.time.sleep", lambda s: None)
    calls = []

    def broken():
        calls.append(1)
        raise ValueError("not a race")

    with pytest.raises(ValueError):
        retry_conflicts(broken, "a test commit")
    assert len(calls) == 1

    def always_races():
        calls.append(1)
        raise delta_errors.ConcurrentAppendException(APPEND_TEXT)

    calls.clear()
    with pytest.raises(delta_errors.ConcurrentAppendException):
        retry_conflicts(always_races, "a test commit", attempts=4)
    assert len(calls) == 4
