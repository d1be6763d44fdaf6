"""A DAG run's state when some of its tasks run after a failure.

Airflow judges a finished run by its leaf tasks alone: a run whose last task runs with trigger
rule ``all_done`` after an earlier task failed ends green (and its failure callbacks never
fire). :func:`fail_run_when_a_task_failed` adds the leaf that keeps such a failure visible.
"""

from __future__ import annotations

from airflow.sdk import DAG, task

WATCHER_TASK_ID = "fail_run_when_a_task_failed"


def fail_run_when_a_task_failed(dag: DAG) -> None:
    """Make every task of ``dag`` an upstream of one more task that runs only when one of them
    failed, and fails: the run then fails too. When none failed it is skipped, and the run's
    state is that of the others."""
    others = list(dag.tasks)

    @task(task_id=WATCHER_TASK_ID, trigger_rule="one_failed", retries=0)
    def watcher() -> None:
        """Fails the run: an upstream task failed (see which in the run's grid)."""
        raise RuntimeError("a task of this run failed: see the run's failed task and its log")

    with dag:
        watch = watcher()
    for other in others:
        other >> watch
