"""tests/unit/conftest.py keeps unit tests pure: Spark and internet sockets fail the test."""

from __future__ import annotations

import socket

import pytest


def test_a_unit_test_that_starts_spark_fails() -> None:
    from pyspark.sql import SparkSession

    with pytest.raises(pytest.fail.Exception, match="move it to tests/spark"):
        SparkSession.builder.master("local[1]").getOrCreate()


def test_a_unit_test_that_opens_a_socket_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match="opens a socket"):
        socket.create_connection(("127.0.0.1", 9), timeout=1)
    with socket.socket() as s, pytest.raises(pytest.fail.Exception, match="opens a socket"):
        s.bind(("127.0.0.1", 0))
