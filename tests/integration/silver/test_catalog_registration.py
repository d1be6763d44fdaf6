"""Catalog registration of silver tables: a name registered at another location is re-pointed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.silver.tables import register_table


def _write(spark: Any, path: Path, rows: int) -> None:
    spark.range(rows).write.format("delta").mode("overwrite").save(str(path))


def test_a_name_registered_for_another_lakehouse_is_re_pointed(spark: Any, tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "t", tmp_path / "b" / "t"
    _write(spark, first, 3)
    _write(spark, second, 5)

    register_table(spark, "catalog_it", "t", str(first))
    assert spark.sql("SELECT count(*) FROM catalog_it.t").first()[0] == 3
    register_table(spark, "catalog_it", "t", str(first))  # same place: nothing changes
    assert spark.sql("SELECT count(*) FROM catalog_it.t").first()[0] == 3

    register_table(spark, "catalog_it", "t", str(second))
    assert spark.sql("SELECT count(*) FROM catalog_it.t").first()[0] == 5
    # the old location keeps its data: the catalog entry was external
    assert spark.read.format("delta").load(str(first)).count() == 3
