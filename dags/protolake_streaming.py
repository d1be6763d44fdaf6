"""protolake_streaming: keeps the continuous bronze and silver streams running.

For the long-running deployment (instead of protolake_ingest: never both, they would share
the checkpoints; protolake_ingest refuses to run while these streams are up). Every few
minutes one task per job judges its stream and starts or restarts it:

- the stream is ``spark-submit pipelines/jobs/run.py <job> --trigger processing-time``,
  started detached in its own session; pid file and log in ``$PROTOLAKE_STREAM_STATE_DIR``
  (default ``$AIRFLOW_HOME/protolake/streams``) on the worker that started it, so run this DAG
  on one worker (a queue or a single worker);
- health is judged from the pid (alive, and still a protolake spark-submit of that job) and
  from the checkpoints (``offsets/`` and ``commits/``): the age of each query's last committed
  batch and its lag (bronze: Kafka end offsets beyond the last planned offsets; silver: bronze
  Delta versions beyond the last planned version). Dead: started. Stale (up for longer than
  the threshold, with lag, and no batch committed for the threshold): stopped (SIGTERM to its
  process group, SIGKILL after 60 s) and started again. Idle (no lag) is healthy. A stream
  this DAG started that died since the previous check is started again and the task fails,
  with the end of its log (secrets redacted): a crash loop shows as failed runs (the tasks are
  not retried; the next check is the retry).

Parse-time settings: ``PROTOLAKE_STREAMING_SCHEDULE`` (default every 5 minutes),
``PROTOLAKE_STREAM_STALE_MINUTES`` (default 15). The DAG is paused when first created.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, task
from protolake_support.environment import env_int
from protolake_support.run_state import fail_run_when_a_task_failed
from protolake_support.supervision import STREAM_JOBS

SCHEDULE = os.environ.get("PROTOLAKE_STREAMING_SCHEDULE", "*/5 * * * *")
STALE_AFTER = timedelta(minutes=env_int("PROTOLAKE_STREAM_STALE_MINUTES", 15))

with DAG(
    dag_id="protolake_streaming",
    description="start, watch and restart the continuous bronze and silver streams",
    schedule=SCHEDULE,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=True,
    tags=["protolake", "streaming"],
    default_args={
        "owner": "protolake",
        # not retried: the next scheduled check is the retry. A retry a minute later would
        # find the stream its failed try restarted alive and end the run green, hiding a
        # crash loop (a stream that dies within minutes of each start)
        "retries": 0,
        "execution_timeout": timedelta(minutes=5),
    },
    doc_md=__doc__,
) as dag:
    previous = None
    for job in STREAM_JOBS:
        # silver is judged and restarted even when bronze's check failed: it has bronze's
        # backlog to take; the run still fails (fail_run_when_a_task_failed)
        @task(task_id=f"ensure_{job}", trigger_rule="all_done")
        def ensure(job: str = job) -> dict[str, object]:
            """Judge the stream; start it when dead, restart it when stale."""
            from protolake_support.supervision import ensure_stream

            return ensure_stream(job, STALE_AFTER.total_seconds())

        current = ensure()
        if previous is not None:
            previous >> current  # silver reads the bronze tables bronze creates
        previous = current
    fail_run_when_a_task_failed(dag)
