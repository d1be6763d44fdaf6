"""What Airflow records of protolake's DAG runs, through real ``airflow dags test`` runs of
small DAGs on a throw-away SQLite database (migrated once for the module):

- a run with a task that ran after a failure (trigger rule ``all_done``): Airflow judges the
  run by its leaves, so without ``fail_run_when_a_task_failed`` it would end green;
- the silver versions announced (``protolake_support.published``): read from the asset events
  Airflow recorded, so a try that fails, even after adding its events, announced nothing."""

from __future__ import annotations

import json
import os
import re
import sqlite3
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
# before publishing or after adding its events (a worker lost before Airflow recorded the
# task's success); it prints the baseline it found and what it announced.
PUBLISHING_DAG = """
import json
from datetime import UTC, datetime

from airflow.sdk import DAG, AssetAlias, task
from protolake_support.published import SILVER_ALIAS, baseline, publish

NOW = json.loads('{now}')
ALIAS = AssetAlias(SILVER_ALIAS)

with DAG(dag_id="publishing", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):

    @task(inlets=[ALIAS], outlets=[ALIAS])
    def silver(*, inlet_events=None, outlet_events=None) -> None:
        found = baseline(inlet_events[ALIAS], "{lake}", lambda: {{"a": 0, "b": 0}})
        print("BASELINE", json.dumps(found, sort_keys=True))
        if "{fail}" == "before":
            raise RuntimeError("the job failed after committing some tables")
        print("PUBLISH", json.dumps(publish(outlet_events[ALIAS], "{lake}", found, NOW)))
        if "{fail}" == "after":
            raise RuntimeError("the task failed after adding its events")

    silver()
"""


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Airflow home of the module's runs (its SQLite database: ``airflow.db``)."""
    return tmp_path_factory.mktemp("airflow")


@pytest.fixture(scope="module")
def airflow(airflow_home: Path) -> Callable[..., tuple[str, str]]:
    """``run(dag_source, dag_id, logical_date)``: the run's final state and its output."""
    home = airflow_home
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


def test_changes_are_announced_until_airflow_records_their_events(
    airflow, airflow_home: Path
) -> None:
    lake = "s3a://bucket/lake"

    def publishing(day: str, now: dict[str, int], fail: str = "") -> tuple[str, dict, list | None]:
        source = PUBLISHING_DAG.format(now=json.dumps(now), fail=fail, lake=lake)
        state, out = airflow(source, "publishing", day)
        (found,) = re.findall(r"BASELINE (\{.*?\})", out)
        published = re.findall(r"PUBLISH (\[.*?\])", out)
        return state, json.loads(found), json.loads(published[0]) if published else None

    # the first run ever: its baseline is the versions found at its start, kept though it fails
    first = publishing("2026-11-20", {"a": 1, "b": 0}, fail="before")
    assert first == ("failed", {"a": 0, "b": 0}, None)
    # a try that fails after adding its events announced nothing: Airflow dropped them
    second = publishing("2026-11-21", {"a": 1, "b": 2}, fail="after")
    assert second == ("failed", {"a": 0, "b": 0}, ["a", "b"])
    assert recorded_events(airflow_home) == []
    # so the next run that succeeds announces the same changes, and Airflow records them
    third = publishing("2026-11-22", {"a": 1, "b": 2})
    assert third == ("success", {"a": 0, "b": 0}, ["a", "b"])
    assert recorded_events(airflow_home) == [("a", 1, lake), ("b", 2, lake)]
    # the next run's baseline is what those events announced; only b changed since
    assert publishing("2026-11-23", {"a": 1, "b": 3}) == ("success", {"a": 1, "b": 2}, ["b"])
    assert recorded_events(airflow_home)[-1] == ("b", 3, lake)


def recorded_events(home: Path) -> list[tuple[str, int, str]]:
    """(table, version, lakehouse) of each silver event Airflow recorded, oldest first."""
    with sqlite3.connect(home / "airflow.db") as db:
        rows = db.execute("SELECT extra FROM asset_event ORDER BY id").fetchall()
    extras = [json.loads(extra) for (extra,) in rows]
    return [(e["table"], e["delta_version"], e["lakehouse"]) for e in extras]
