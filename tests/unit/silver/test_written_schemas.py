"""The driver's knowledge of its silver tables' columns (``pipelines.silver.written_schemas``):
a query keeps what it wrote only when no other query stored anything since it planned."""

from __future__ import annotations

from pyspark.sql import types as T  # noqa: N812

from pipelines.silver.written_schemas import WrittenSchemas


def _columns(*names: str) -> T.StructType:
    return T.StructType([T.StructField(n, T.StringType()) for n in names])


def test_a_query_keeps_what_it_wrote_when_nothing_changed_since_its_plan() -> None:
    schemas = WrittenSchemas()
    cached, stamp = schemas.read("/t")
    assert cached is None
    schemas.store("/t", stamp, _columns("a"))
    cached, again = schemas.read("/t")
    assert cached == _columns("a") and again != stamp
    schemas.store("/t", again, _columns("a", "b"))
    assert schemas.read("/t")[0] == _columns("a", "b")


def test_two_queries_writing_at_once_leave_the_table_to_be_read_again() -> None:
    # both plan against a; one adds b, the other c: the table holds a, b, c, which neither knew
    schemas = WrittenSchemas()
    schemas.store("/t", schemas.read("/t")[1], _columns("a"))
    _, first = schemas.read("/t")
    _, second = schemas.read("/t")
    schemas.store("/t", second, _columns("a", "b"))
    schemas.store("/t", first, _columns("a", "c"))
    assert schemas.read("/t")[0] is None
    assert schemas.read("/other")[0] is None


def test_a_write_planned_before_a_clear_keeps_nothing() -> None:
    schemas = WrittenSchemas()
    schemas.store("/t", schemas.read("/t")[1], _columns("a"))
    _, before = schemas.read("/t")
    schemas.clear()  # another query's batch failed
    schemas.store("/t", before, _columns("a", "b"))
    cached, after = schemas.read("/t")
    assert cached is None
    schemas.store("/t", after, _columns("a", "b"))
    assert schemas.read("/t")[0] == _columns("a", "b")
