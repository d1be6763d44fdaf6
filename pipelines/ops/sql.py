"""``protolake sql``: query the lakehouse by table name, as an analyst would.

    protolake sql --config F "SELECT ... FROM silver.<table> ..." [--limit N] [--json]
    protolake sql --config F --tables          # what can be queried, with row counts

Every table of the lakehouse is registered (``lakehouse.catalog``) in the ``[catalog]``
databases and queried by name: ``silver.<table>``, ``bronze.<table>``, ``quarantine.records``,
``quality.results`` by default. With ``catalog.metastore_uri`` the catalog is the shared Hive
metastore (what the jobs, the SQL endpoint and any other Spark application see); without it,
the session's own catalog, registered anew at each start. A layer whose database is empty
is queryable as temporary views ``<layer>_<table>``.

Other engines read the same tables by path (``lakehouse/silver/<table>``): delta-rs,
DuckDB's ``delta_scan``, Trino's Delta connector. A query error is a clear message and exit
code 2; so is a statement that would write (``INSERT``, ``DELETE``, ``OPTIMIZE``, DDL, ...:
:func:`check_reads_only`): nothing is written, as the jobs write the lakehouse under its
writer leases.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from lakehouse.catalog import layer_tables
from lakehouse.catalog import register_lakehouse as register_lakehouse_tables
from lakehouse.layout import LAYERS, Layout, table_name
from pipelines.ops.common import emit, loaded_config, table, to_jsonable
from pipelines.settings import ProtolakeConfig
from pipelines.settings.clients import catalog_databases, open_session

DEFAULT_LIMIT = 50


def register_lakehouse(spark: Any, cfg: ProtolakeConfig) -> list[dict[str, Any]]:
    """Register every table of the lakehouse; returns ``[{"name", "layer", "path"}]``."""
    layout = Layout(cfg.lakehouse_path)
    databases = catalog_databases(cfg)
    found = [
        {"name": t.name, "layer": t.layer, "path": t.path}
        for t in register_lakehouse_tables(spark, layout, databases)
    ]
    for layer in LAYERS:
        if databases.of(layer):
            continue
        for path in layer_tables(layout, layer, spark):
            view = f"{layer}_{table_name(path)}"
            spark.read.format("delta").load(path).createOrReplaceTempView(view)
            found.append({"name": view, "layer": layer, "path": path})
    return found


class WritingStatementError(ValueError):
    """A statement that would write or change the lakehouse or the session (not a query)."""


#: the statements that only read, besides queries: their parsed plans' class names begin so
_READING_COMMANDS = ("Show", "Describe", "Explain")


def check_reads_only(spark: Any, query: str) -> None:
    """Refuse a statement that is not a query (parsed, not run: Spark runs a command as it
    plans it). Queries (``SELECT``, ``WITH``, ``VALUES``, ``TABLE``) and ``SHOW``,
    ``DESCRIBE`` and ``EXPLAIN`` pass; a write (``INSERT``, ``DELETE``, ``MERGE``, ``UPDATE``,
    ``OPTIMIZE``, ``VACUUM``, ``RESTORE``, DDL, ``EXECUTE IMMEDIATE``) or a session change
    (``SET``, ``CACHE``) anywhere in the parsed plan (behind a ``WITH``, in a multi-insert) is
    a :class:`WritingStatementError`: the jobs write the lakehouse, under its writer leases.

    A query that does not parse passes through: Spark's own error says what is wrong."""
    jvm = spark.sparkContext._jvm
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(query)
    except Exception:  # noqa: BLE001 - py4j's ParseException: spark.sql reports it
        return
    command = jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.plans.logical.Command")
    writing = _writing_node(plan, command)
    if writing is not None:
        raise WritingStatementError(
            f"only queries run here (SELECT, WITH, VALUES, TABLE, SHOW, DESCRIBE, EXPLAIN); "
            f"this statement ({writing}) would write or change the lakehouse or the session"
        )


def _writing_node(plan: Any, command: Any) -> str | None:
    """The class name of the first node of the parsed ``plan`` that is no query, or None."""
    kind = str(plan.getClass().getSimpleName())
    if bool(command.isInstance(plan)):
        return None if kind.startswith(_READING_COMMANDS) else kind
    # INSERT, RESTORE; INSERT OVERWRITE [LOCAL] DIRECTORY (InsertIntoDir: no Command);
    # EXECUTE IMMEDIATE
    if kind.endswith("Statement") or kind.startswith("Insert") or "ExecuteImmediate" in kind:
        return kind
    children = plan.children()
    for i in range(children.size()):
        found = _writing_node(children.apply(i), command)
        if found is not None:
            return found
    return None


def run_query(spark: Any, query: str, limit: int) -> dict[str, Any]:
    """Run ``query`` (:func:`check_reads_only` first); at most ``limit`` rows come back
    (``truncated`` says if there were more)."""
    check_reads_only(spark, query)
    df = spark.sql(query)
    rows = df.limit(limit + 1).collect() if limit > 0 else df.collect()
    truncated = limit > 0 and len(rows) > limit
    rows = rows[:limit] if truncated else rows
    return {
        "columns": df.columns,
        "rows": [to_jsonable(r.asDict(recursive=True)) for r in rows],
        "truncated": truncated,
    }


def add_parser(subparsers: Any) -> None:
    """Register ``protolake sql``."""
    p = subparsers.add_parser(
        "sql",
        help="query the lakehouse's tables by name",
        description="Register the lakehouse's tables in a Spark session and run a SQL query "
        "(silver.<table>, bronze.<table>, quarantine.records, quality.results: the [catalog] "
        "databases). QUERY '-' reads it from stdin.",
    )
    p.add_argument("query", nargs="?", help="the SQL query ('-': read it from stdin)")
    p.add_argument("--tables", action="store_true", help="list the queryable tables instead")
    p.add_argument(
        "--limit", type=int, default=DEFAULT_LIMIT, help="rows to show, 0 = all (default 50)"
    )
    p.set_defaults(func=run_from_args)


def run_from_args(args: argparse.Namespace) -> int:
    """``protolake sql``."""
    query = sys.stdin.read() if args.query == "-" else args.query
    if not args.tables and not (query or "").strip():
        print("protolake sql: give a query (or --tables)", file=sys.stderr)
        return 2
    if args.limit < 0:
        print("protolake sql: --limit must be 0 or more", file=sys.stderr)
        return 2
    cfg = loaded_config(args.config, missing_ok=True)
    spark = open_session(cfg, "protolake-sql")
    tables = register_lakehouse(spark, cfg)
    if args.tables:
        for t in tables:
            t["rows"] = spark.read.format("delta").load(t["path"]).count()
        data: dict[str, Any] = {"tables": tables}
        emit(args.json, data, lambda c: c.print(_tables_view(tables)))
        return 0
    from pyspark.errors import PySparkException

    try:
        with _query_error_logs_muted(not args.verbose):
            data = run_query(spark, query, args.limit)
    except PySparkException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"protolake sql: the query failed: {first}", file=sys.stderr)
        return 2
    except WritingStatementError as exc:
        print(f"protolake sql: {exc}", file=sys.stderr)
        return 2
    emit(args.json, data, lambda c: _print_result(c, data))
    return 0


# PySpark 4 logs every SQL error it converts from the JVM, with the Java and Python stack
# traces, as one JSON document on stderr (PySparkException._log_exception, these two loggers).
_QUERY_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


@contextmanager
def _query_error_logs_muted(muted: bool = True) -> Iterator[None]:
    """Silence PySpark's JSON log of query errors while the user's query runs.

    The error itself still propagates: ``run_from_args`` reports it as one line (and ``-v``
    keeps the log, for whoever wants the stack traces).
    """
    if not muted:
        yield
        return
    from pyspark.logger import PySparkLogger

    # PySparkLogger.getLogger, not logging.getLogger: pyspark calls these loggers with
    # keyword context (errorClass=...), which a plain Logger created first would reject.
    loggers = [PySparkLogger.getLogger(name) for name in _QUERY_ERROR_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _tables_view(tables: list[dict[str, Any]]) -> Any:
    return table(
        "tables",
        ["name", "layer", "rows", "path"],
        [[t["name"], t["layer"], t["rows"], t["path"]] for t in tables],
    )


def _print_result(console: Any, data: dict[str, Any]) -> None:
    rows = [[r.get(c) for c in data["columns"]] for r in data["rows"]]
    console.print(table("result", data["columns"], rows))
    more = " (more rows: raise --limit)" if data["truncated"] else ""
    console.print(f"{len(rows)} row(s){more}")


def main(argv: Sequence[str] | None = None) -> int:
    from pipelines.cli import main as cli_main

    return cli_main(["sql", *(argv or [])])
