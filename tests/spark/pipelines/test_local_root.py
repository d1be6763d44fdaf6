"""A plain lakehouse path is a local folder to protolake; ``prepare_session`` refuses it when
Spark's default file system would read it as another (``preflight.check_local_root``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pipelines.settings import parse_config
from pipelines.settings.clients import prepare_session
from pipelines.settings.preflight import StoreError

KAFKA = {"bootstrap_servers": "127.0.0.1:9092", "topics": ["shop.orders"]}


def _config(path: str) -> Any:
    return parse_config({"kafka": KAFKA, "lakehouse": {"path": path}})


@pytest.fixture
def hdfs_default(spark: Any) -> Iterator[None]:
    """The session's Hadoop configuration with an HDFS default file system (only read here:
    nothing connects to it), restored after."""
    jconf = spark.sparkContext._jsc.hadoopConfiguration()
    before = jconf.get("fs.defaultFS")
    jconf.set("fs.defaultFS", "hdfs://namenode:8020")
    try:
        yield
    finally:
        jconf.set("fs.defaultFS", before or "file:///")


def test_a_plain_path_is_refused_when_the_default_file_system_is_not_local(
    spark: Any, hdfs_default: None
) -> None:
    with pytest.raises(StoreError) as err:
        prepare_session(spark, _config("/data/lakehouse"))
    message = str(err.value)
    assert "'/data/lakehouse' has no scheme" in message
    assert "hdfs://namenode:8020" in message
    assert "file:///data/lakehouse" in message


def test_a_path_with_its_scheme_is_taken_as_written(spark: Any, hdfs_default: None) -> None:
    prepare_session(spark, _config("file:///data/lakehouse"))
    prepare_session(spark, _config("hdfs://namenode:8020/lakehouse"))


def test_a_plain_path_is_a_local_folder_on_a_local_default(spark: Any, tmp_path: Any) -> None:
    prepare_session(spark, _config(str(tmp_path / "lake")))
