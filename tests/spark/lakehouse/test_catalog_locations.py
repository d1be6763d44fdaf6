"""Registering a table whose name the catalog holds already, in a session of its own (the
suite's shared session's catalog): the same folder is taken, another folder is a conflict
that names both, also when the registered folder holds no table any more."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakehouse.catalog import CatalogLocationError, register_table, registered_location

DATABASE = "protolake_test_locations"


@pytest.fixture
def database(spark: Any) -> Iterator[str]:
    yield DATABASE
    spark.sql(f"DROP DATABASE IF EXISTS {DATABASE} CASCADE")


def _table(spark: Any, path: Path) -> str:
    spark.range(2).write.format("delta").save(str(path))
    return str(path)


def test_the_same_folder_in_another_spelling_is_taken(spark: Any, tmp_path: Path, database):
    path = _table(spark, tmp_path / "my lake" / "orders")  # a space: a URI spells it %20
    assert register_table(spark, database, path) == f"{database}.orders"
    assert register_table(spark, database, f"file://{path}/") == f"{database}.orders"
    assert registered_location(spark, database, "orders") == f"file:{path}"
    assert registered_location(spark, database, "nothing") is None


def test_another_folder_is_a_conflict_naming_both(spark: Any, tmp_path: Path, database):
    first = _table(spark, tmp_path / "a" / "orders")
    second = _table(spark, tmp_path / "b" / "orders")
    register_table(spark, database, first)
    with pytest.raises(CatalogLocationError) as info:
        register_table(spark, database, second)
    message = str(info.value)
    assert first in message and second in message and "there any more" not in message
    assert f"DROP TABLE {database}.orders" in message


def test_an_entry_whose_folder_is_gone_is_a_conflict_not_a_delta_error(
    spark: Any, tmp_path: Path, database
):
    # a lakehouse moved or deleted while the metastore kept its names: Spark's own
    # tableExists would fail loading the gone table ([DELTA_PATH_DOES_NOT_EXIST])
    old = _table(spark, tmp_path / "old" / "orders")
    register_table(spark, database, old)
    shutil.rmtree(tmp_path / "old")
    new = _table(spark, tmp_path / "new" / "orders")
    with pytest.raises(CatalogLocationError) as info:
        register_table(spark, database, new)
    message = str(info.value)
    assert old in message and new in message and "(no Delta table there any more)" in message
    # the advice works: the entry drops, and the new folder registers
    spark.sql(f"DROP TABLE {database}.orders")
    assert register_table(spark, database, new) == f"{database}.orders"
    assert spark.table(f"{database}.orders").count() == 2
