"""The catalog as production runs it: a metastore whose tables live in PostgreSQL (Debian's
server, ``infra/stack.sh up postgres``; ``PROTOLAKE_METASTORE_DB=postgres``) and the SQL
endpoint on that metastore, both started for this module on free ports, in a run folder of its
own, so that a test may restart the metastore without touching the shared stack.

A table registered through the metastore is a row of PostgreSQL's ``TBLS``, and the endpoint
(another Spark application) reads it; the silver stream runs while an analyst queries the
endpoint, and both go on across a metastore restart that falls on a registration.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from registry_server import start_registry_server

from pipelines.naming import bronze_table_of_topic, table_name_for
from tests.support.sql_endpoint import eventually, hive, query
from tests.support.stack import BOOTSTRAP, free_port, register_proto_schema

ROOT = Path(__file__).resolve().parents[3]
STACK = str(ROOT / "infra/stack.sh")


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}


@dataclass
class Services:
    run: Path
    env: dict[str, str]
    metastore_uri: str
    sql_port: int

    def stack(self, *args: str) -> None:
        done = subprocess.run([STACK, *args], env=self.env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]

    def psql(self, sql: str) -> list[list[str]]:
        """Rows of ``sql`` in the metastore's database, with the credential of run/postgres.env."""
        creds = dict(
            line.split("=", 1)
            for line in (self.run / "postgres.env").read_text().splitlines()
            if "=" in line and not line.startswith("#")
        )
        done = subprocess.run(
            ["psql", "-X", "-tA", "-F", "|", "-v", "ON_ERROR_STOP=1", "-c", sql],
            env={**self.env, **creds},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        return [line.split("|") for line in done.stdout.splitlines() if line]

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        return query(sql, port=self.sql_port)

    def detail(self, table: str) -> dict[str, Any]:
        """``DESCRIBE DETAIL table`` over the endpoint (its properties map arrives as JSON)."""
        with hive(port=self.sql_port) as cur:
            cur.execute(f"DESCRIBE DETAIL {table}")
            out = dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))
        out["properties"] = json.loads(out["properties"] or "{}")
        return dict(out)


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    # Not pytest's tmp_path: PostgreSQL runs as the user postgres, which must reach the folder.
    run = Path(tempfile.mkdtemp(prefix="protolake-pg-"))
    run.chmod(0o755)
    metastore_port, sql_port = free_port(), free_port()
    env = {
        **_env(),
        "PROTOLAKE_RUN_DIR": str(run),
        "PROTOLAKE_POSTGRES_PORT": str(free_port()),
        "PROTOLAKE_METASTORE_DB": "postgres",
        "PROTOLAKE_METASTORE_PORT": str(metastore_port),
        "PROTOLAKE_SQL_PORT": str(sql_port),
        "PROTOLAKE_SQL_HEAP": "512m",
    }
    svc = Services(run, env, f"thrift://127.0.0.1:{metastore_port}", sql_port)
    try:
        for service in ("postgres", "metastore", "sqlserver"):
            svc.stack("up", service)
        yield svc
    finally:
        for service in ("sqlserver", "metastore", "postgres"):
            subprocess.run([STACK, "down", service], env=env, capture_output=True)
        if (run / "logs").is_dir():  # the services' logs outlive the run folder, for a failure
            shutil.copytree(run / "logs", tmp_path_factory.mktemp("logs"), dirs_exist_ok=True)
        shutil.rmtree(run, ignore_errors=True)


REGISTER = """
import sys
from lakehouse.catalog import register_table
from pipelines.spark import build_session
uri, database, path, warehouse = sys.argv[1:]
spark = build_session("register", conf={
    "spark.sql.catalogImplementation": "hive", "spark.hadoop.hive.metastore.uris": uri,
    "spark.sql.warehouse.dir": warehouse})
print(register_table(spark, database, path, comment="Four probes.",
                     properties={"protolake.message_type": "pg.v1.Probe"}))
"""


def test_a_registered_table_is_a_row_of_postgres_and_the_endpoint_reads_it(
    services: Services, spark: Any, tmp_path: Path
) -> None:
    path = str(tmp_path / "lakehouse/silver/pg_v1_probe")
    spark.range(4).withColumnRenamed("id", "n").write.format("delta").save(path)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            REGISTER,
            services.metastore_uri,
            "silver",
            path,
            str(tmp_path / "warehouse"),
        ],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["silver.pg_v1_probe"]

    # Spark keeps a Delta table's location in its storage properties (SERDE_PARAMS "path")
    rows = services.psql(
        'SELECT d."NAME", t."TBL_NAME", t."TBL_TYPE", p."PARAM_VALUE" FROM "TBLS" t '
        'JOIN "DBS" d ON d."DB_ID" = t."DB_ID" JOIN "SDS" s ON s."SD_ID" = t."SD_ID" '
        """JOIN "SERDE_PARAMS" p ON p."SERDE_ID" = s."SERDE_ID" AND p."PARAM_KEY" = 'path' """
        """WHERE t."TBL_NAME" = 'pg_v1_probe'"""
    )
    assert len(rows) == 1, rows
    database, table, kind, location = rows[0]
    assert (database, table, kind) == ("silver", "pg_v1_probe", "EXTERNAL_TABLE")
    assert location.rstrip("/").endswith(path)

    assert services.query("SELECT sum(n), count(*) FROM silver.pg_v1_probe") == [(6, 4)]
    detail = services.detail("silver.pg_v1_probe")
    assert detail["description"] == "Four probes."
    assert detail["properties"]["protolake.message_type"] == "pg.v1.Probe"


PING_V1 = (
    'syntax = "proto3";\npackage catalogit.v1;\n\n// A probe.\nmessage Ping {\n'
    "  // Its name.\n  string id = 1;\n  int64 n = 2;\n}\n"
)
# v2 adds a field: silver registers the table again (its schema versions) when v2 arrives
PING_V2 = PING_V1.replace("  int64 n = 2;\n", "  int64 n = 2;\n  // A note.\n  string note = 3;\n")


def _produce_pings(topic: str, schema_id: int, start: int, count: int) -> None:
    from confluent_kafka import Producer

    from tests.support.ops_itkit import framed, ping_payload

    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
    for i in range(start, start + count):
        p.produce(topic, value=framed(schema_id, ping_payload(f"p{i}", i)))
    assert p.flush(30) == 0


def _delta_rows(path: str) -> int:
    from deltalake import DeltaTable

    try:
        return int(DeltaTable(path).to_pyarrow_dataset().count_rows())
    except Exception:  # noqa: BLE001 - not created yet
        return -1


def test_the_stream_and_the_endpoint_continue_across_a_metastore_restart(
    services: Services, tmp_path: Path
) -> None:
    """Silver streams (processing-time) while an analyst counts its rows over the endpoint.
    The metastore stops while a new schema version arrives (silver registers the table again:
    it waits for the metastore), starts again, and the stream and the endpoint both go on.
    A second topic's first records make a bronze table, registered by the running bronze
    query; the silver table's comment and properties name both topics and both versions."""
    from pipelines.demo.produce import ensure_topics

    registry = start_registry_server(port=0)
    topic = f"it.catalog.stream.{uuid.uuid4().hex[:8]}"
    later = f"{topic}.later"  # no records until the stream runs
    ensure_topics(BOOTSTRAP, [topic, later], None, partitions=1)
    v1 = register_proto_schema(registry.url, f"{topic}-value", PING_V1)
    _produce_pings(topic, v1, 0, 5)
    lakehouse = tmp_path / "lakehouse"
    config = tmp_path / "protolake.toml"
    config.write_text(
        f'[lakehouse]\npath = "{lakehouse}"\n'
        f'[kafka]\nbootstrap_servers = "{BOOTSTRAP}"\ntopics = ["{topic}", "{later}"]\n'
        f'[registry]\nurl = "{registry.url}"\n'
        '[bronze]\nprocessing_interval = "2 seconds"\n'
        '[silver]\nprocessing_interval = "2 seconds"\ntable_discovery_seconds = 2\n'
        f'[catalog]\nmetastore_uri = "{services.metastore_uri}"\nsilver_database = "silver"\n'
        'bronze_database = "bronze"\nquarantine_database = ""\nquality_database = ""\n'
    )
    log = tmp_path / "stream.log"
    stream = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pipelines import bronze, silver; "
            "from pipelines.settings import load_config; cfg = load_config(sys.argv[1]); "
            "bronze.run(cfg); bronze.run(cfg, 'processing-time', await_termination=False); "
            "silver.run(cfg, 'processing-time')",
            str(config),
        ],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=open(log, "w"),  # noqa: SIM115 - lives as long as the stream
    )
    name = table_name_for("catalogit.v1.Ping")
    table, path = f"silver.{name}", str(lakehouse / "silver" / name)
    try:
        count = lambda: services.query(f"SELECT count(*) FROM {table}")[0][0]  # noqa: E731
        eventually(count, 5)
        services.stack("down", "metastore")
        v2 = register_proto_schema(registry.url, f"{topic}-value", PING_V2)
        _produce_pings(topic, v2, 5, 7)
        # silver writes the v2 records while the metastore is away; its registration waits
        eventually(lambda: _delta_rows(path), 12, seconds=120)
        # the registration of the v2 rows waits for the metastore: it is brought back only
        # once the stream says so (its commit shows before the registration that follows it)
        waited = lambda: "does not answer" in log.read_text()  # noqa: E731
        eventually(waited, True, seconds=120)
        services.stack("up", "metastore")
        eventually(count, 12)
        _produce_pings(later, v2, 12, 3)
        eventually(count, 15)
        # the running bronze query registered the table it created for the new topic
        bronze_tables = lambda: {r[1] for r in services.query("SHOW TABLES IN bronze")}  # noqa: E731
        eventually(bronze_tables, {bronze_table_of_topic(topic), bronze_table_of_topic(later)}, 60)
        bronze = services.detail(f"bronze.{bronze_table_of_topic(later)}")
        assert f"topic {later} " in bronze["description"]
        assert bronze["properties"]["protolake.kafka_topics"] == later
        # the registration that waited for the metastore went through: both versions named
        detail = services.detail(table)
        versions = detail["properties"]["protolake.schema_versions"].split(",")
        assert sorted(versions) == sorted([f"id:{v1}", f"id:{v2}"])
        assert detail["properties"]["protolake.kafka_topics"] == ",".join(sorted([topic, later]))
        assert f"Kafka topics: {', '.join(sorted([topic, later]))}." in detail["description"]
        assert f"id:{v1}, id:{v2}" in detail["description"]
        # what the analyst sees of the .proto: the message's and the fields' comments
        assert detail["description"].startswith("A probe.")
        columns = {r[0]: r[2] for r in services.query(f"DESCRIBE TABLE {table}")}
        assert (columns["id"], columns["note"]) == ("Its name.", "A note.")
        assert stream.poll() is None, log.read_text()[-3000:]
    finally:
        stream.send_signal(signal.SIGTERM)
        try:
            stream.wait(60)
        except subprocess.TimeoutExpired:
            stream.kill()
        registry.stop()


def test_a_lost_password_file_never_replaces_the_metastores_cluster(services: Services) -> None:
    tables_before = services.psql('SELECT count(*) FROM "TBLS"')
    env_file, kept = services.run / "postgres.env", services.run / "postgres.env.kept"
    services.stack("down", "postgres")
    env_file.rename(kept)
    try:
        done = subprocess.run(
            [STACK, "up", "postgres"], env=services.env, capture_output=True, text=True
        )
        assert done.returncode != 0
        assert "restore that file, or remove" in done.stderr
        assert (services.run / "postgres" / "data" / "PG_VERSION").is_file()
    finally:
        kept.rename(env_file)
    services.stack("up", "postgres")
    assert services.psql('SELECT count(*) FROM "TBLS"') == tables_before
