"""Fixtures of the DAG unit tests: a throw-away AIRFLOW_HOME and a runner of Python snippets
in a fresh interpreter (Airflow reads its configuration once, at import; and the parse-time
checks need an interpreter that has imported nothing else)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
DAGS = REPO / "dags"


@pytest.fixture
def airflow_env(tmp_path: Path) -> dict[str, str]:
    """Environment of a fresh Airflow: its home in tmp_path, the repo's dags/ folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PROTOLAKE_"))}
    env.update(
        {
            "AIRFLOW_HOME": str(tmp_path / "airflow"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "PYTHONPATH": os.pathsep.join([str(DAGS), str(REPO)]),
        }
    )
    return env


@pytest.fixture
def run_python(airflow_env: dict[str, str]) -> Callable[..., Any]:
    """Run a snippet in a fresh interpreter; it prints one JSON document as its last line."""

    def run(code: str, extra_env: dict[str, str] | None = None, timeout: float = 300) -> Any:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            env={**airflow_env, **(extra_env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    return run
