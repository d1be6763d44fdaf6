"""The rule of ``tests/unit``: pure and fast, no JVM and no network.

Every unit test runs under :func:`no_spark_no_sockets`, which fails it at once when it builds a
SparkSession or SparkContext, or connects or binds an internet socket (loopback included:
an in-process HTTP server is a socket too). A test that needs Spark belongs in ``tests/spark``;
one that needs a server, Kafka or the registry belongs in ``tests/integration``.

Subprocesses are not watched: the DAG tests run Airflow snippets in a fresh interpreter.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

# urllib3 (under requests, Great Expectations and the registry client) probes IPv6 support by
# binding ('::1', 0) when first imported. Imported here, before any test runs, that probe is no
# test's doing: otherwise the first unit test to import it, whichever runs first, would fail.
import urllib3  # noqa: F401

_NETWORK_FAMILIES = (socket.AF_INET, socket.AF_INET6)


def _refuse(what: str) -> None:
    pytest.fail(
        f"a unit test {what}: move it to tests/spark (Spark) or tests/integration (network)",
        pytrace=False,
    )


@pytest.fixture
def spark() -> Any:
    """Shadows the suite's session: a unit test that asks for Spark fails before it starts."""
    _refuse("asks for the Spark session")


@pytest.fixture(autouse=True)
def no_spark_no_sockets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    def no_spark(*_: Any, **__: Any) -> Any:
        _refuse("starts Spark")

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", no_spark)
    monkeypatch.setattr(SparkSession.Builder, "create", no_spark, raising=False)
    monkeypatch.setattr(SparkContext, "__init__", no_spark)
    monkeypatch.setattr(SparkContext, "getOrCreate", classmethod(no_spark))

    def guarded(name: str) -> Any:
        real = getattr(socket.socket, name)

        def call(self: socket.socket, *args: Any, **kwargs: Any) -> Any:
            if self.family in _NETWORK_FAMILIES:
                _refuse(f"opens a socket ({name} {args[0] if args else ''})")
            return real(self, *args, **kwargs)

        return call

    for name in ("connect", "connect_ex", "bind"):
        monkeypatch.setattr(socket.socket, name, guarded(name))
    yield
