"""A DAG run with a task that ran after a failure (trigger rule ``all_done``): Airflow judges
the run by its leaves, so without ``fail_run_when_a_task_failed`` it would end green. Real
runs of a small DAG through ``airflow dags test`` on a throw-away SQLite database."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parents[3] / "dags"
AIRFLOW = Path(sys.executable).parent / "airflow"

SMALL_DAG = """
from datetime import UTC, datetime

from airflow.sdk import DAG, chain, task
from protolake_support.run_state import fail_run_when_a_task_failed

for dag_id, watched in (("watched", True), ("unwatched", False)):
    with DAG(dag_id=dag_id, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)) as dag:

        @task(trigger_rule="all_done")
        def first(fail: bool = False) -> None:
            if fail:
                raise RuntimeError("first failed")

        @task(trigger_rule="all_done")
        def second() -> None:
            print("second ran")

        chain(first(fail="{fail}" == "yes"), second())
        if watched:
            fail_run_when_a_task_failed(dag)
    globals()[dag_id] = dag
"""


@pytest.fixture
def airflow(airflow_env: dict[str, str], tmp_path: Path):
    folder = tmp_path / "dags"
    folder.mkdir()
    env = {**airflow_env, "AIRFLOW__CORE__DAGS_FOLDER": str(folder)}
    env["PYTHONPATH"] = f"{DAGS}:{env['PYTHONPATH']}"
    migrated = subprocess.run(
        [str(AIRFLOW), "db", "migrate"], env=env, capture_output=True, text=True, timeout=600
    )
    assert migrated.returncode == 0, migrated.stderr[-3000:]

    def run(dag_id: str, fail: bool) -> tuple[str, str]:
        (folder / "small.py").write_text(SMALL_DAG.replace("{fail}", "yes" if fail else "no"))
        proc = subprocess.run(
            [str(AIRFLOW), "dags", "test", dag_id, "2026-11-22"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        out = proc.stdout + proc.stderr
        found = re.findall(rf"DagRun Finished: dag_id={dag_id}, .*?state=(\w+)", out)
        assert found, out[-5000:]
        return found[-1], out

    return run


def test_a_failed_task_fails_the_run_although_the_last_task_ran(airflow) -> None:
    state, out = airflow("unwatched", fail=True)
    assert state == "success" and "second ran" in out  # Airflow's own verdict: the leaf's
    state, out = airflow("watched", fail=True)
    assert state == "failed" and "second ran" in out
    state, out = airflow("watched", fail=False)
    assert state == "success"
