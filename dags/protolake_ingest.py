"""protolake_ingest: Kafka -> bronze -> silver (with quality checks) -> summary, on a schedule.

Tasks (each a transaction: a re-run of any of them, or of the whole logical date, leaves the
tables as they are, because bronze and silver are available-now streaming jobs that resume
from their checkpoints and write idempotently):

- ``bronze``: ``spark-submit pipelines/jobs/run.py bronze --trigger available-now``;
- ``silver``: the same with ``silver`` (quality rules of the configuration run inside it);
  publishes one asset event ``protolake://silver/<table>`` per silver table it changed,
  through the asset alias ``protolake-silver`` (the tables are per message type, known only
  when data arrives). Downstream DAGs schedule on ``Asset("protolake://silver/<table>")``.
  Neither is submitted when its checkpoints say it is caught up (bronze: no record in its
  topics beyond its last batch; silver: no bronze version beyond its last batches, no
  bronze table it has not read; a batch left uncommitted counts as work): a run with
  nothing new starts no Spark application, and does none of the job's start-up work either
  (registering the tables in the catalog: the next run with work does). A bronze commit
  without data (OPTIMIZE) counts as work for silver once, until silver has read past it.
- ``summary``: row counts of bronze, silver and quarantine from the Delta logs (quarantine:
  the records still quarantined; replayed ones count in silver, as in ``protolake status``).

Environment (read when a task runs, on the worker): ``PROTOLAKE_CONFIG`` (required), see
``protolake_support.environment``. At parse time: ``PROTOLAKE_INGEST_SCHEDULE`` (cron or
preset, default every 15 minutes), ``PROTOLAKE_INGEST_TIMEOUT_MINUTES`` (per Spark task,
default 60).
One run at a time: two runs would share the streaming checkpoints.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, task
from protolake_support.environment import env_int
from protolake_support.spark_submit import ProtolakeSparkSubmitOperator

SCHEDULE = os.environ.get("PROTOLAKE_INGEST_SCHEDULE", "*/15 * * * *")
TIMEOUT = timedelta(minutes=env_int("PROTOLAKE_INGEST_TIMEOUT_MINUTES", 60))

with DAG(
    dag_id="protolake_ingest",
    description="Kafka -> bronze -> silver (+ quality) -> summary",
    schedule=SCHEDULE,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["protolake", "ingest"],
    default_args={
        "owner": "protolake",
        "retries": env_int("PROTOLAKE_TASK_RETRIES", 2),
        "retry_delay": timedelta(minutes=2),
        "retry_exponential_backoff": True,
    },
    doc_md=__doc__,
) as dag:
    bronze = ProtolakeSparkSubmitOperator(
        task_id="bronze",
        subcommand="bronze",
        subcommand_args=["--trigger", "available-now"],
        refuse_when_streaming=True,
        skip_when_caught_up=True,
        execution_timeout=TIMEOUT,
    )
    silver = ProtolakeSparkSubmitOperator(
        task_id="silver",
        subcommand="silver",
        subcommand_args=["--trigger", "available-now"],
        refuse_when_streaming=True,
        skip_when_caught_up=True,
        publish_silver=True,
        execution_timeout=TIMEOUT,
    )

    @task(task_id="summary", execution_timeout=timedelta(minutes=5))
    def summary() -> dict[str, dict[str, int | None]]:
        """Print rows per table (the returned mapping goes to XCom)."""
        from protolake_support.environment import config_path
        from protolake_support.tables import format_counts, lakehouse_counts

        counts = lakehouse_counts(config_path())
        print(format_counts(counts))
        return counts

    bronze >> silver >> summary()
