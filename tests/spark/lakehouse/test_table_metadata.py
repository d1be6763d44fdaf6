"""The comment and properties of a Delta table, read from its log by path (Spark with Delta,
no service), as Delta's own DESCRIBE DETAIL reports them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakehouse.tables import table_metadata, table_properties


def _detail(spark: Any, path: str) -> tuple[str, dict[str, str]]:
    row = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    return row["description"] or "", dict(row["properties"])


def test_comment_and_properties_are_the_logs(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "orders")
    spark.range(3).write.format("delta").save(path)
    bare = table_metadata(spark, path)
    assert bare is not None
    assert (bare.description, bare.properties) == _detail(spark, path)
    assert bare.description == ""  # none set: the log has no such field

    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('comment' = 'Orders, one per row', "
        "'protolake.message_type' = 'shop.v1.Order', 'protolake.note' = 'a = b; \"c\"')"
    )
    found = table_metadata(spark, path)
    assert found is not None
    description, properties = _detail(spark, path)
    assert (found.description, found.properties) == (description, properties)
    assert found.description == "Orders, one per row"
    assert found.properties["protolake.note"] == 'a = b; "c"'
    assert table_properties(spark, path)["protolake.message_type"] == "shop.v1.Order"


def test_a_folder_without_a_table_has_no_metadata(spark: Any, tmp_path: Path) -> None:
    assert table_metadata(spark, str(tmp_path)) is None
    assert table_properties(spark, str(tmp_path)) == {}
