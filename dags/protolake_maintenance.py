"""protolake_maintenance: daily OPTIMIZE and VACUUM of the bronze, silver, quarantine and quality
tables (``quality/results``: one small commit per stream and micro-batch).

One task per table group, each ``spark-submit pipelines/jobs/run.py maintain --config FILE
--table-group <group> --retention-hours N`` (``protolake maintain``, pipelines/ops/maintain.py),
one after the other (compaction is heavy; the groups do not need to race each other).

VACUUM retention: ``PROTOLAKE_VACUUM_RETENTION_HOURS`` (default 168 h = 7 days, Delta's own
default; shorter retention can delete files a running stream or a time-travel query still
reads). Schedule: ``PROTOLAKE_MAINTENANCE_SCHEDULE`` (default ``@daily``). Old rows of the
quality results (not only old files) go by ``quality.results_retention_days`` in the
configuration, which silver applies when it starts.

Then ``replay`` (``protolake replay --reason R ...``, pipelines/ops/replay.py) re-decodes the
quarantined records whose reason a fix upstream can cure: ``PROTOLAKE_REPLAY_REASONS``
(comma-separated, default ``UNKNOWN_SCHEMA``: a schema registered after its records arrived;
``all``: every reason). Records that decode move to silver (idempotently; the silver tables it
changes are published like protolake_ingest's); the others stay with their new reason (shown
by ``protolake status``; the task only fails when replay itself fails). It runs last and is
not retried, so it never holds up the maintenance.

A group whose maintenance failed does not keep the next ones from theirs (each task runs once
the one before it ended); the run still fails when any task failed
(:func:`protolake_support.run_state.fail_run_when_a_task_failed`).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, chain
from protolake_support.environment import env_int
from protolake_support.run_state import fail_run_when_a_task_failed
from protolake_support.spark_submit import ProtolakeSparkSubmitOperator

SCHEDULE = os.environ.get("PROTOLAKE_MAINTENANCE_SCHEDULE", "@daily")
RETENTION_HOURS = env_int("PROTOLAKE_VACUUM_RETENTION_HOURS", 168)
TABLE_GROUPS = ("bronze", "silver", "quarantine", "quality")
REPLAY_REASONS = [
    r.strip().upper()
    for r in os.environ.get("PROTOLAKE_REPLAY_REASONS", "UNKNOWN_SCHEMA").split(",")
    if r.strip()
]
REPLAY_ARGS = (
    [] if REPLAY_REASONS == ["ALL"] else [a for r in REPLAY_REASONS for a in ("--reason", r)]
)

with DAG(
    dag_id="protolake_maintenance",
    description="OPTIMIZE + VACUUM of bronze, silver, quarantine and quality results",
    schedule=SCHEDULE,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["protolake", "maintenance"],
    default_args={
        "owner": "protolake",
        "retries": env_int("PROTOLAKE_TASK_RETRIES", 1),
        "retry_delay": timedelta(minutes=10),
        "execution_timeout": timedelta(hours=3),
    },
    doc_md=__doc__,
) as dag:
    chain(
        *(
            ProtolakeSparkSubmitOperator(
                task_id=f"maintain_{group}",
                subcommand="maintain",
                subcommand_args=[
                    "--table-group",
                    group,
                    "--retention-hours",
                    str(RETENTION_HOURS),
                ],
                trigger_rule="all_done",  # a group that failed does not hold up the next
            )
            for group in TABLE_GROUPS
        ),
        ProtolakeSparkSubmitOperator(
            task_id="replay",
            subcommand="replay",
            subcommand_args=REPLAY_ARGS,
            publish_silver=True,
            retries=0,
            trigger_rule="all_done",  # a failed maintenance of one group does not block it
        ),
    )
    fail_run_when_a_task_failed(dag)
