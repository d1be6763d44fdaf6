"""lakehouse.catalog's retries while the metastore does not answer, and the deferral of a
writing job's registrations past them (no Spark: the action is a function that fails the way
Spark's catalog does)."""

from __future__ import annotations

import pytest

from lakehouse import catalog
from lakehouse.catalog import (
    CatalogLocationError,
    CatalogUnavailableError,
    metastore_unreachable,
    with_retries,
)

# What Spark's catalog raised (an AnalysisException) in the silver stream of
# tests/integration/catalog/test_metastore_postgres.py while its metastore was stopped.
DOWN = RuntimeError(
    "org.apache.hadoop.hive.ql.metadata.HiveException: Unable to fetch table /lake/bronze/t. "
    "Could not connect to meta store using any of the URIs provided. Most recent failure: "
    "org.apache.thrift.transport.TTransportException: java.net.ConnectException: "
    "Connection refused"
)
DROPPED = RuntimeError("org.apache.thrift.transport.TTransportException: java.net.SocketException")


class Flaky:
    """Fails with ``errors`` in turn, then returns "ok"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_an_outage_shorter_than_the_retries_is_waited_out() -> None:
    slept: list[float] = []
    action = Flaky(DOWN, DROPPED)
    got = with_retries(action, "thrift://m:9083", "registering s.t", (1, 2, 4), slept.append)
    assert (got, action.calls, slept) == ("ok", 3, [1, 2])


def test_a_longer_outage_names_the_metastore() -> None:
    slept: list[float] = []
    action = Flaky(DOWN, DOWN, DOWN, DOWN)
    with pytest.raises(CatalogUnavailableError, match=r"thrift://m:9083.*registering s\.t") as exc:
        with_retries(action, "thrift://m:9083", "registering s.t", (1, 2, 4), slept.append)
    assert (action.calls, slept) == (4, [1, 2, 4])
    assert exc.value.__cause__ is DOWN


def test_an_answer_of_the_metastore_is_not_retried() -> None:
    slept: list[float] = []
    action = Flaky(CatalogLocationError("s.t is registered at /a, not at /b"))
    with pytest.raises(CatalogLocationError):
        with_retries(action, "thrift://m:9083", "registering s.t", (1, 2), slept.append)
    assert (action.calls, slept) == (1, [])


def test_what_counts_as_unreachable() -> None:
    assert metastore_unreachable(DOWN) and metastore_unreachable(DROPPED)
    assert metastore_unreachable(ConnectionRefusedError("Connection refused"))
    assert not metastore_unreachable(RuntimeError("[TABLE_OR_VIEW_NOT_FOUND] s.t"))


def test_a_writing_job_defers_registrations_while_the_metastore_is_down(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``register_or_defer``: a metastore down through every retry is a warning and None, no
    registration is tried for ``DEFERRED_SECONDS``, then they are tried again."""
    now = [1000.0]
    attempts: list[str] = []
    down = [True]

    def register(_spark: object, database: str, path: str, **_kw: object) -> str:
        attempts.append(path)
        if down[0]:
            raise CatalogUnavailableError("the metastore thrift://m:9083 did not answer")
        return f"{database}.t"

    monkeypatch.setattr(catalog, "register_table", register)
    monkeypatch.setattr(catalog.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(catalog, "_deferred_until", 0.0)
    assert catalog.register_or_defer(None, "silver", "/lh/silver/t") is None  # type: ignore[arg-type]
    assert "thrift://m:9083 did not answer; silver.t is not registered now" in caplog.text
    now[0] += catalog.DEFERRED_SECONDS - 1
    assert catalog.register_or_defer(None, "silver", "/lh/silver/u") is None  # type: ignore[arg-type]
    assert attempts == ["/lh/silver/t"]  # not tried while deferred
    down[0] = False
    now[0] += 2
    assert catalog.register_or_defer(None, "silver", "/lh/silver/u") == "silver.t"  # type: ignore[arg-type]
    assert attempts == ["/lh/silver/t", "/lh/silver/u"]


def test_a_writing_job_still_fails_on_a_name_registered_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def register(*_args: object, **_kw: object) -> str:
        raise CatalogLocationError("silver.t is registered at /elsewhere")

    monkeypatch.setattr(catalog, "register_table", register)
    monkeypatch.setattr(catalog, "_deferred_until", 0.0)
    with pytest.raises(CatalogLocationError):
        catalog.register_or_defer(None, "silver", "/lh/silver/t")  # type: ignore[arg-type]
