"""What Airflow records of protolake's DAG runs, through real ``airflow dags test`` runs of
small DAGs on a throw-away SQLite database (migrated once for the module):

- a run with a task that ran after a failure (trigger rule ``all_done``): Airflow judges the
  run by its leaves, so without ``fail_run_when_a_task_failed`` it would end green;
- the silver versions last published (``protolake_support.published``), kept in a Variable
  across tries and runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DAGS = REPO / "dags"
AIRFLOW = Path(sys.executable).parent / "airflow"

WATCHED_DAGS = """
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

# Each run is one try of a publishing task: the versions it finds ("now"), whether it fails
# before publishing; it prints what it would publish, and the baseline it found.
PUBLISHING_DAG = """
import json
from datetime import UTC, datetime

from airflow.sdk import DAG, task
from protolake_support.published import baseline, changed_tables, remember_published

NOW = json.loads('{now}')

with DAG(dag_id="publishing", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):

    @task
    def silver() -> None:
        found = baseline("s3a://bucket/lake", lambda: {{"a": 0, "b": 0}})
        print("BASELINE", json.dumps(found, sort_keys=True))
        if {fail}:
            raise RuntimeError("the job failed after committing some tables")
        print("PUBLISH", json.dumps(changed_tables(found, NOW)))
        remember_published("s3a://bucket/lake", NOW)

    silver()
"""


@pytest.fixture(scope="module")
def airflow(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., tuple[str, str]]:
    """``run(dag_source, dag_id, logical_date)``: the run's final state and its output."""
    home = tmp_path_factory.mktemp("airflow")
    folder = home / "dags"
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PROTOLAKE_"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "PYTHONPATH": os.pathsep.join([str(DAGS), str(REPO)]),
        }
    )
    migrated = subprocess.run(
        [str(AIRFLOW), "db", "migrate"], env=env, capture_output=True, text=True, timeout=600
    )
    assert migrated.returncode == 0, migrated.stderr[-3000:]

    def run(source: str, dag_id: str, logical_date: str) -> tuple[str, str]:
        for old in folder.glob("*.py"):
            old.unlink()
        (folder / f"{dag_id}.py").write_text(source)
        proc = subprocess.run(
            [str(AIRFLOW), "dags", "test", dag_id, logical_date],
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
    def watched(dag_id: str, fail: bool) -> tuple[str, str]:
        source = WATCHED_DAGS.replace("{fail}", "yes" if fail else "no")
        return airflow(source, dag_id, "2026-11-22")

    state, out = watched("unwatched", fail=True)
    assert state == "success" and "second ran" in out  # Airflow's own verdict: the leaf's
    state, out = watched("watched", fail=True)
    assert state == "failed" and "second ran" in out
    state, out = watched("watched", fail=False)
    assert state == "success"


def test_changes_of_a_run_that_failed_are_published_by_the_next_that_succeeds(airflow) -> None:
    def publishing(day: str, now: dict[str, int], fail: bool) -> tuple[str, dict, list | None]:
        source = PUBLISHING_DAG.format(now=json.dumps(now), fail=fail)
        state, out = airflow(source, "publishing", day)
        (found,) = re.findall(r"BASELINE (\{.*?\})", out)
        published = re.findall(r"PUBLISH (\[.*?\])", out)
        return state, json.loads(found), json.loads(published[0]) if published else None

    # the first run ever: its baseline is the versions found at its start, kept though it fails
    assert publishing("2026-11-20", {"a": 1, "b": 0}, fail=True) == (
        "failed",
        {"a": 0, "b": 0},
        None,
    )
    # the next run finds that baseline, not the versions the failed run left
    assert publishing("2026-11-21", {"a": 1, "b": 2}, fail=False) == (
        "success",
        {"a": 0, "b": 0},
        ["a", "b"],
    )
    assert publishing("2026-11-22", {"a": 1, "b": 2}, fail=False) == (
        "success",
        {"a": 1, "b": 2},
        [],
    )
