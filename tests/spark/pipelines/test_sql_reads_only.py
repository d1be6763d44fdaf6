"""``protolake sql`` runs queries only: a statement that would write or change the lakehouse
(or the session) is refused before Spark plans it, since Spark runs a command as it plans it
(``pipelines.ops.sql.check_reads_only``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipelines.ops.sql import WritingStatementError, check_reads_only, run_query

READS = [
    "SELECT 1",
    "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
    "VALUES (1), (2)",
    "TABLE t",
    "SHOW TABLES",
    "DESCRIBE TABLE t",
    "DESCRIBE HISTORY t",
    "DESCRIBE DETAIL t",
    "EXPLAIN DELETE FROM t WHERE id = 1",
    "SELECT * FROM t VERSION AS OF 0",
    "SELECT * FROM t UNION ALL SELECT * FROM (WITH c AS (SELECT 1 AS id) SELECT id FROM c)",
    "SELECT nope FROM",  # does not parse: Spark's own error says so
]
WRITES = [
    "INSERT INTO t SELECT 9",
    "INSERT OVERWRITE t SELECT 9",
    "DELETE FROM t WHERE id = 1",
    "UPDATE t SET id = 9",
    "MERGE INTO t USING t AS s ON t.id = s.id WHEN MATCHED THEN DELETE",
    "OPTIMIZE t",
    "VACUUM t",
    "RESTORE TABLE t TO VERSION AS OF 0",
    "DROP TABLE t",
    "TRUNCATE TABLE t",
    "CREATE TABLE u AS SELECT 1",
    "ALTER TABLE t SET TBLPROPERTIES ('a' = 'b')",
    "SET spark.sql.shuffle.partitions = 1",
    "CACHE TABLE t",
    "WITH c AS (SELECT 9 AS id) INSERT INTO t SELECT * FROM c",
    "WITH c AS (SELECT 1) DELETE FROM t WHERE id = 1",
    "FROM t INSERT INTO t SELECT * INSERT INTO t SELECT *",
    "EXECUTE IMMEDIATE 'DELETE FROM t WHERE id = 1'",
    "INSERT OVERWRITE DIRECTORY '/tmp/protolake-never' USING parquet SELECT 1",
    "INSERT OVERWRITE LOCAL DIRECTORY '/tmp/protolake-never' USING parquet SELECT 1",
]


@pytest.fixture
def table_t(spark: Any, tmp_path: Path) -> Any:
    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)
    spark.read.format("delta").load(path).createOrReplaceTempView("t")
    yield path
    spark.catalog.dropTempView("t")


@pytest.mark.parametrize("statement", READS)
def test_reading_statements_pass(spark: Any, statement: str) -> None:
    check_reads_only(spark, statement)


@pytest.mark.parametrize("statement", WRITES)
def test_writing_statements_are_refused(spark: Any, statement: str) -> None:
    with pytest.raises(WritingStatementError, match="only queries run here"):
        check_reads_only(spark, statement)


def test_a_refused_delete_leaves_the_table_as_it_was(spark: Any, table_t: str) -> None:
    with pytest.raises(WritingStatementError, match=r"\(DeleteFromTable\)"):
        run_query(spark, f"DELETE FROM delta.`{table_t}` WHERE id = 1", 50)
    assert spark.read.format("delta").load(table_t).count() == 3
    assert run_query(spark, "SELECT count(*) AS n FROM t", 50)["rows"] == [{"n": 3}]
