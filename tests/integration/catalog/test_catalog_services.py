"""The analysts' side against the real services: the shared metastore, the SQL endpoint
(Spark Thrift Server, HiveServer2 protocol) and other engines reading by path.

The module fixture produces a small demo stream and runs bronze then silver in a subprocess
whose configuration names the stack's metastore (``[catalog] metastore_uri``) and databases of
this module's own: the jobs register what they create there. Then a second Spark application
with only the documented settings finds the tables by name, a HiveServer2 client (PyHive)
queries them over the wire, and DuckDB and delta-rs read them by path with Spark's counts.
The stream running while the endpoint answers, across a metastore restart, is in
test_metastore_postgres.py (on a metastore of its own, which it may restart).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from registry_server import start_registry_server

from lakehouse.layout import Layout, table_name
from lakehouse.tables import list_delta_tables
from pipelines.naming import table_name_for
from pipelines.ops.maintain import listing_parallelism
from tests.support.sql_endpoint import hive as _hive
from tests.support.sql_endpoint import query as _query
from tests.support.stack import (
    BOOTSTRAP,
    METASTORE_URI,
    SQL_HOST,
    SQL_PORT,
    check_port,
    free_port,
)

ROOT = Path(__file__).resolve().parents[3]
ORDER = "shop.v1.Order"
LAYERS = ("bronze", "silver", "quarantine", "quality")


@dataclass
class Lake:
    layout: Layout
    databases: dict[str, str]  # layer -> database
    config: Path


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}


def _run(args: list[str], timeout: int = 300) -> str:
    proc = subprocess.run(
        args, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    from pipelines.demo.produce import produce_demo_stream

    check_port("127.0.0.1", int(METASTORE_URI.rsplit(":", 1)[1]), "metastore")
    tmp = tmp_path_factory.mktemp("catalog")
    registry = start_registry_server(port=0)
    prefix = f"it.catalog.{uuid.uuid4().hex[:8]}."
    demo = produce_demo_stream(
        BOOTSTRAP, registry.url, topic_prefix=prefix, records=60, seed=5, poison_every=9
    )
    tag = uuid.uuid4().hex[:8]
    databases = {layer: f"it{tag}_{layer}" for layer in LAYERS}
    root = tmp / "lakehouse"
    config = tmp / "protolake.toml"
    # two of the stream's topics (orders, evolving from v1 to v2; line items, with a quarantine
    # rule): the catalog names every table alike, and each topic more is a query more per job
    part = demo.on_topics([f"{prefix}orders", f"{prefix}order_lines"])
    assert part.expected_quarantine_by_reason().get("DQ_FAILED"), "the rule below finds rows"
    topics = ", ".join(f'"{t}"' for t in part.topics)
    config.write_text(
        f'[lakehouse]\npath = "{root}"\n'
        f'[kafka]\nbootstrap_servers = "{BOOTSTRAP}"\ntopics = [{topics}]\n'
        f'[registry]\nurl = "{registry.url}"\n'
        f'[catalog]\nmetastore_uri = "{METASTORE_URI}"\n'
        + "".join(f'{layer}_database = "{db}"\n' for layer, db in databases.items())
        + "[[quality.expectations]]\n"
        'message_type = "shop.v1.Order.LineItem"\n'
        'expectation = "expect_column_values_to_be_between"\n'
        'kwargs = { column = "quantity", min_value = 1, max_value = 100 }\n'
        'policy = "quarantine"\n'
        '[spark.conf]\n"spark.sql.shuffle.partitions" = "2"\n'
    )
    # bronze then silver, in one process of their own: its session talks to the metastore
    _run(
        [
            sys.executable,
            "-c",
            "import sys; from pipelines import bronze, silver; "
            "from pipelines.settings import load_config; "
            "cfg = load_config(sys.argv[1]); bronze.run(cfg); silver.run(cfg)",
            str(config),
        ]
    )
    registry.stop()
    yield Lake(Layout(str(root)), databases, config)
    _drop_databases(databases.values())


def _drop_databases(names: Any) -> None:
    """Best effort: the module's databases leave the shared metastore (no data is deleted)."""
    from pyhive.exc import OperationalError

    with _hive() as cur:
        for db in names:
            try:
                cur.execute(f"DROP DATABASE IF EXISTS `{db}` CASCADE")
            except OperationalError:  # a retried drop that the first attempt had done
                pass


def _paths(lake: Lake) -> dict[str, str]:
    """Every table of the lakehouse by its expected catalog name."""
    out = {
        f"{lake.databases['silver']}.{table_name(p)}": p
        for p in list_delta_tables(lake.layout.silver)
    }
    out.update(
        {
            f"{lake.databases['bronze']}.{table_name(p)}": p
            for p in list_delta_tables(lake.layout.bronze)
        }
    )
    out[f"{lake.databases['quarantine']}.records"] = lake.layout.quarantine
    out[f"{lake.databases['quality']}.results"] = lake.layout.quality_results
    return out


def _delta_rows(path: str) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(path).to_pyarrow_dataset().count_rows())


def test_a_second_spark_application_finds_every_table_by_name(lake: Lake) -> None:
    out = _run(
        [
            sys.executable,
            str(ROOT / "tests/support/catalog_reader.py"),
            METASTORE_URI,
            *lake.databases.values(),
        ]
    )
    found = json.loads(out)
    expected = _paths(lake)
    assert set(found) == set(expected)
    for name, path in expected.items():
        assert found[name]["rows"] == _delta_rows(path), name
        assert found[name]["location"].rstrip("/").endswith(path.rstrip("/")), name
    order = found[f"{lake.databases['silver']}.{table_name_for(ORDER)}"]
    # the demo registers its schemas without comments (test_metastore_postgres.py has some)
    assert order["comment"].startswith("Protobuf message shop.v1.Order")
    assert "sales_channel" in order["columns"]  # added by v2 of the schema
    assert order["properties"]["protolake.message_type"] == ORDER
    assert order["properties"]["protolake.schema_versions"].count("id:") == 2


def test_the_sql_endpoint_lists_describes_and_queries(lake: Lake) -> None:
    check_port(SQL_HOST, SQL_PORT, "SQL endpoint")
    databases = {r[0] for r in _query("SHOW DATABASES", username="analyst")}
    assert set(lake.databases.values()) <= databases

    order = f"{lake.databases['silver']}.{table_name_for(ORDER)}"
    described = {r[0]: r for r in _query(f"DESCRIBE TABLE EXTENDED {order}")}
    assert "status" in described and "sales_channel" in described

    # the quarantine by reason, as delta-rs counts it from the files
    from deltalake import DeltaTable

    rows = DeltaTable(lake.layout.quarantine).to_pyarrow_table(columns=["reason_code"])
    want = Counter(rows.column("reason_code").to_pylist())
    got = _query(
        f"SELECT reason_code, count(*) FROM {lake.databases['quarantine']}.records "
        "GROUP BY reason_code"
    )
    assert dict(got) == dict(want) and "DQ_FAILED" in want

    # the demo's analyst query
    got = _query(f"SELECT status, count(*) FROM {order} GROUP BY status")
    statuses = DeltaTable(lake.layout.silver_table(table_name_for(ORDER))).to_pyarrow_table(
        columns=["status"]
    )
    assert dict(got) == dict(Counter(statuses.column("status").to_pylist()))


def test_an_added_column_shows_in_the_endpoint_without_a_restart(lake: Lake, spark: Any) -> None:
    path = lake.layout.silver_table(table_name_for(ORDER))
    name = f"{lake.databases['silver']}.{table_name_for(ORDER)}"
    before = {r[0] for r in _query(f"DESCRIBE TABLE {name}")}
    assert "catalog_probe" not in before
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (catalog_probe STRING COMMENT 'probe')")
    after = {r[0]: r[2] for r in _query(f"DESCRIBE TABLE {name}")}
    assert after["catalog_probe"] == "probe"
    assert _query(f"SELECT count(catalog_probe), count(*) FROM {name}")[0] == (
        0,
        _delta_rows(path),
    )


def test_a_wrong_password_is_refused(lake: Lake, tmp_path: Path) -> None:
    """A second endpoint with a password (PROTOLAKE_SQL_PASSWORD_FILE), in its own run folder."""
    secret = tmp_path / "sql-password"
    secret.write_text("s3cret-for-tests\n")
    port = free_port()
    env = {
        **_env(),
        "PROTOLAKE_RUN_DIR": str(tmp_path / "run"),
        "PROTOLAKE_SQL_PORT": str(port),
        "PROTOLAKE_SQL_PASSWORD_FILE": str(secret),
        "PROTOLAKE_SQL_HEAP": "512m",
    }
    stack = [str(ROOT / "infra/stack.sh")]
    up = subprocess.run([*stack, "up", "sqlserver"], env=env, capture_output=True, text=True)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        good = _query(
            "SELECT 1", port=port, username="protolake", password="s3cret-for-tests", auth="CUSTOM"
        )
        assert good == [(1,)]
        with pytest.raises(Exception, match="(?i)auth|password|sasl|peer|login"):
            _query("SELECT 1", port=port, username="protolake", password="wrong", auth="CUSTOM")
        log = (tmp_path / "run/logs/sqlserver.log").read_text()
        assert "s3cret-for-tests" not in log
    finally:
        subprocess.run([*stack, "down", "sqlserver"], env=env, capture_output=True, text=True)


def _duckdb() -> Any:
    import duckdb
    import duckdb_extension_delta

    con = duckdb.connect()
    ext = Path(duckdb_extension_delta.__file__).parent / "extensions"
    found = sorted(ext.glob(f"v{duckdb.__version__}/delta.duckdb_extension"))
    assert found, f"no delta extension for DuckDB {duckdb.__version__} in {ext}"
    con.execute(f"LOAD '{found[0]}'")
    return con


KEYS = ["_kafka_topic", "_kafka_partition", "_kafka_offset"]


def _compare_engines(spark: Any, path: str, columns: list[str]) -> int:
    """The rows of ``columns`` (ordered by Kafka position) by Spark, DuckDB and delta-rs."""
    from deltalake import DeltaTable

    cols = [*KEYS, *columns]
    by_spark = [
        tuple(r)
        for r in spark.read.format("delta").load(path).select(*cols).orderBy(*KEYS).collect()
    ]
    quoted = ", ".join(f'"{c}"' for c in cols)
    by_duckdb = (
        _duckdb()
        .execute(f"SELECT {quoted} FROM delta_scan('{path}') ORDER BY {', '.join(KEYS)}")
        .fetchall()
    )
    arrow = (
        DeltaTable(path).to_pyarrow_table(columns=cols).sort_by([(k, "ascending") for k in KEYS])
    )
    by_deltars = list(zip(*(arrow.column(c).to_pylist() for c in cols), strict=True))
    assert by_duckdb == by_spark, path
    assert by_deltars == by_spark, path
    return len(by_spark)


def _scalar_columns(spark: Any, path: str) -> list[str]:
    from pyspark.sql import types as T  # noqa: N812

    simple = (T.StringType, T.LongType, T.IntegerType, T.BooleanType, T.DoubleType)
    schema = spark.read.format("delta").load(path).schema
    return [f.name for f in schema.fields if isinstance(f.dataType, simple) and f.name not in KEYS]


def test_duckdb_and_delta_rs_read_silver_and_quarantine_by_path(lake: Lake, spark: Any) -> None:
    silver = list_delta_tables(lake.layout.silver)
    assert len(silver) >= 3
    for path in silver:
        assert _compare_engines(spark, path, _scalar_columns(spark, path)) > 0
    quarantine = ["reason_code", "reason", "_schema_id"]
    assert _compare_engines(spark, lake.layout.quarantine, quarantine) > 0

    # the evolved table, after OPTIMIZE and VACUUM (no retention: old files are gone)
    order = lake.layout.silver_table(table_name_for(ORDER))
    spark.sql(f"OPTIMIZE delta.`{order}`")
    key = "spark.databricks.delta.retentionDurationCheck.enabled"
    spark.conf.set(key, "false")
    try:
        # listed in as many tasks as `protolake maintain` uses (Spark's default is 10,000)
        with listing_parallelism(spark):
            spark.sql(f"VACUUM delta.`{order}` RETAIN 0 HOURS")
    finally:
        spark.conf.unset(key)
    assert _compare_engines(spark, order, _scalar_columns(spark, order)) > 0
    assert _query(f"SELECT count(*) FROM {lake.databases['silver']}.{table_name(order)}") == [
        (_delta_rows(order),)
    ]
