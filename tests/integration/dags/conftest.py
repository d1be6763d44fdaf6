"""Fixtures of the DAG integration tests: the real local stack (infra/stack.sh: Kafka and the
schema registry), one local[2] Spark session to read what the DAG wrote, and a fresh Airflow
(its own AIRFLOW_HOME with SQLite, ``airflow db migrate``, connections as environment
variables) that runs the repository's dags/ folder through the venv's ``airflow`` command.

Addresses come from PROTOLAKE_KAFKA_BOOTSTRAP / PROTOLAKE_REGISTRY_URL (defaults 127.0.0.1:9092
and http://127.0.0.1:8081). A stack that does not answer fails the tests (never skips them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

REPO = Path(__file__).resolve().parents[3]
DAGS = REPO / "dags"
AIRFLOW = Path(sys.executable).parent / "airflow"
BOOTSTRAP = os.environ.get("PROTOLAKE_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
REGISTRY = os.environ.get("PROTOLAKE_REGISTRY_URL", "http://127.0.0.1:8081")


@pytest.fixture(scope="session")
def bootstrap() -> str:
    try:
        AdminClient({"bootstrap.servers": BOOTSTRAP}).list_topics(timeout=15)
    except KafkaException as exc:
        pytest.fail(f"Kafka at {BOOTSTRAP} does not answer ({exc}); run `infra/stack.sh up`")
    return BOOTSTRAP


@pytest.fixture(scope="session")
def registry_url() -> str:
    try:
        with urllib.request.urlopen(f"{REGISTRY}/subjects", timeout=10) as response:
            response.read()
    except OSError as exc:
        pytest.fail(
            f"schema registry at {REGISTRY} does not answer ({exc}); run `infra/stack.sh up`"
        )
    return REGISTRY


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pipelines.spark import build_session

    session = build_session(
        "dags-integration-tests",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()


@pytest.fixture(scope="module")
def topic_prefix(bootstrap: str, registry_url: str) -> Iterator[str]:
    """A unique topic prefix; its topics and subjects are removed at the end."""
    prefix = f"dagit{uuid.uuid4().hex[:10]}."
    yield prefix
    from confluent_kafka.schema_registry import SchemaRegistryClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    if topics:
        for future in admin.delete_topics(topics, operation_timeout=30).values():
            future.result(timeout=60)
    client = SchemaRegistryClient({"url": registry_url})
    for subject in client.get_subjects():
        if subject.startswith(prefix):
            client.delete_subject(subject)
            client.delete_subject(subject, permanent=True)


class Airflow:
    """A throw-away Airflow installation running the repository's DAGs."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home = home
        self.env = env

    def run(self, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(AIRFLOW), *args],
            env=self.env,
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        """:meth:`run` in the background: collect it with ``communicate()``."""
        return subprocess.Popen(
            [str(AIRFLOW), *args],
            env=self.env,
            cwd=self.home,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def python(self, code: str) -> Any:
        """Run a snippet with the DAGs' environment; it prints JSON as its last line."""
        return self.python_run(code)[0]

    def python_run(self, code: str) -> tuple[Any, subprocess.CompletedProcess[str]]:
        """:meth:`python`, and the finished process (its output, to search)."""
        proc = subprocess.run(
            [sys.executable, "-c", code],
            env=self.env,
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
        return json.loads(proc.stdout.strip().splitlines()[-1]), proc


def make_airflow(home: Path, config: Path, registry_url: str, state_dir: Path) -> Airflow:
    """Environment for the DAGs; the registry URL reaches the job only through the
    ``protolake_registry`` connection (the TOML file says ``${env:PROTOLAKE_REGISTRY_URL}``)."""
    reg = urllib.parse.urlsplit(registry_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PROTOLAKE_"))}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "AIRFLOW_CONN_PROTOLAKE_REGISTRY": json.dumps(
                {"conn_type": "http", "host": reg.hostname, "port": reg.port, "schema": reg.scheme}
            ),
            "PROTOLAKE_CONFIG": str(config),
            "PROTOLAKE_TASK_RETRIES": "0",  # a failure shows at once, not after the retries
            "PROTOLAKE_STREAM_STATE_DIR": str(state_dir),
            "PROTOLAKE_KAFKA_BOOTSTRAP": BOOTSTRAP,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONPATH": os.pathsep.join([str(DAGS), str(REPO)]),
        }
    )
    home.mkdir(parents=True, exist_ok=True)
    return Airflow(home, env)
