"""A throw-away Airflow installation that runs the repository's dags/ folder through the
venv's ``airflow`` command: its own AIRFLOW_HOME with SQLite, connections as environment
variables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

from tests.support.stack import BOOTSTRAP

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
AIRFLOW = Path(sys.executable).parent / "airflow"


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
