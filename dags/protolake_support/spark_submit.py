"""The operator of every protolake Spark task: ``spark-submit pipelines/jobs/run.py <subcommand>``.

Importing this module loads only the standard library and Airflow (DAG files import it at
parse time); ``pipelines`` is imported in :meth:`ProtolakeSparkSubmitOperator.execute`.
Settings come from the worker (:mod:`.environment`) and the Airflow connection
``spark_default`` (the master); ``PYSPARK_PYTHON`` is the Python of the Spark driver and
executors (default: Airflow's interpreter with a local master, the cluster's own otherwise).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from protolake_support.environment import (
    SPARK_CONN_ID,
    ProtolakeSetupError,
    config_path,
    load_job_config,
    registry_env,
    spark_bin_dir,
)
from protolake_support.published import SILVER_ALIAS, baseline, publish


class ProtolakeSparkSubmitOperator(SparkSubmitOperator):
    """``spark-submit pipelines/jobs/run.py <subcommand> --config $PROTOLAKE_CONFIG [args]``.

    Everything that depends on the worker (the config path, the py-files zip, the jars, which
    spark-submit, the Python) is settled in :meth:`execute`, not when the DAG file is parsed.
    With a local master the job gets ``pipelines.spark.local_conf()`` and Airflow's Python; with
    a cluster master it gets ``PYSPARK_PYTHON`` if the worker sets it, else the cluster's.
    Every job also gets ``spark.redaction.regex = pipelines.spark.REDACTION_REGEX``: on
    Kubernetes and YARN the provider turns the job's environment (``PROTOLAKE_REGISTRY_AUTH``
    ...) into ``spark.kubernetes.driverEnv.*`` / ``spark.yarn.appMasterEnv.*`` settings, which
    Spark's default regex would show in its UI and event log.
    ``conf`` given to the operator is applied last.

    ``refuse_when_streaming``: fail before submitting while the continuous streams of the
    ``protolake_streaming`` DAG run (they would share the checkpoints).

    ``skip_when_caught_up`` (bronze and silver with ``--trigger available-now``): submit
    nothing when the job's checkpoints say it has nothing to do
    (:func:`protolake_support.progress.pending_work`: every query ran, none has a batch in
    flight or is behind its source); the task then succeeds at once, without a Spark start.

    ``publish_silver`` (silver only): after the job, an asset event
    ``protolake://silver/<table>`` is added to the ``protolake-silver`` asset alias for every
    silver table whose Delta version changed since the events Airflow recorded last announced
    it (:mod:`protolake_support.published`: a run that failed after committing some tables has
    them announced by the next run that succeeds). The operator then declares the alias as an
    outlet and as an inlet (it reads those events).
    """

    ui_color = "#ffd8a8"

    def __init__(
        self,
        *,
        subcommand: str,
        subcommand_args: Sequence[str] = (),
        publish_silver: bool = False,
        refuse_when_streaming: bool = False,
        skip_when_caught_up: bool = False,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("conn_id", SPARK_CONN_ID)
        kwargs.setdefault("name", f"protolake-{subcommand}")
        super().__init__(**kwargs)
        self.subcommand = subcommand
        self.subcommand_args = list(subcommand_args)
        self.publish_silver = publish_silver
        if publish_silver:
            self._declare_silver_alias()
        self.refuse_when_streaming = refuse_when_streaming
        if skip_when_caught_up and (
            subcommand not in ("bronze", "silver") or "available-now" not in self.subcommand_args
        ):
            raise ValueError("skip_when_caught_up: for bronze or silver with available-now only")
        self.skip_when_caught_up = skip_when_caught_up

    def execute(self, context: Any) -> None:
        from pipelines.jobs import RUN_SCRIPT, build_py_files
        from pipelines.spark import REDACTION_REGEX, find_spark_jars, is_local_master, local_conf

        config = config_path()
        if self.refuse_when_streaming:
            self._refuse_when_streaming()
        lakehouse = load_job_config(config).lakehouse_path if self.publish_silver else ""
        if self.skip_when_caught_up and self._caught_up(config):
            if self.publish_silver:  # what an earlier run that failed committed
                self._publish_since(context, lakehouse, config, None)
            return
        master = str(self._get_hook()._connection["master"])  # the connection's master URL
        local = is_local_master(master)
        python = os.environ.get("PYSPARK_PYTHON") or (sys.executable if local else "")
        conf: dict[str, Any] = local_conf() if local else {}
        conf["spark.redaction.regex"] = REDACTION_REGEX
        if python:
            conf["spark.pyspark.python"] = python
            conf["spark.pyspark.driver.python"] = python
        conf.update(self.conf or {})
        bin_dir = spark_bin_dir()
        env: dict[str, Any] = {
            # the hook runs "spark-submit" from PATH: put the chosen one first
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "SPARK_HOME": str(Path(bin_dir).parent),
            **({"PYSPARK_PYTHON": python} if python else {}),
            **({"SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")} if local else {}),
            **registry_env(),
            **(self.env_vars or {}),
        }
        self.application = str(RUN_SCRIPT)
        self.py_files = build_py_files()  # content-hashed: rebuilt only when the code changed
        self.jars = ",".join(find_spark_jars())
        self.conf = conf
        self.env_vars = env
        self.application_args = [self.subcommand, "--config", config, *self.subcommand_args]
        self._hook = None  # rebuilt by execute() from the settings above
        before = None
        if self.publish_silver:  # the baseline is stored before the job may change a table
            before = self._baseline(context, lakehouse, config)
        super().execute(context)
        if self.publish_silver:
            self._publish_since(context, lakehouse, config, before)

    def _declare_silver_alias(self) -> None:
        """Declare the alias the events go through as an outlet (to add them) and as an inlet
        (to read those recorded before), unless the DAG already did."""
        from airflow.sdk import AssetAlias

        alias = AssetAlias(SILVER_ALIAS)
        if alias not in self.outlets:
            self.add_outlets([alias])
        if alias not in self.inlets:
            self.add_inlets([alias])

    @staticmethod
    def _refuse_when_streaming() -> None:
        from protolake_support.supervision import running_streams

        running = running_streams()
        if running:
            raise ProtolakeSetupError(
                f"continuous streams are running ({', '.join(running)}; see the "
                "protolake_streaming DAG): an available-now run would share their "
                "checkpoints. Stop them or pause this DAG."
            )

    def _caught_up(self, config: str) -> bool:
        """Whether the job has nothing to do (logged either way, with the reason). A check
        that fails says no: the job is submitted."""
        from protolake_support.progress import pending_work, stream_parts

        try:
            pending = pending_work(stream_parts(self.subcommand, config))
        except Exception as exc:  # noqa: BLE001 - not knowing is a reason to run the job
            pending = f"checkpoints not read: {type(exc).__name__}"
        if pending is None:
            self.log.info("%s is caught up with its sources: nothing submitted", self.subcommand)
            return True
        self.log.info("%s has work (%s): submitting", self.subcommand, pending)
        return False

    def _publish_since(
        self, context: Any, lakehouse: str, config: str, before: dict[str, int] | None
    ) -> None:
        """An asset event per silver table changed since the events recorded last announced
        it (:mod:`protolake_support.published`)."""
        from airflow.sdk import AssetAlias

        from protolake_support.tables import silver_versions

        if before is None:  # (not read yet by this try)
            before = self._baseline(context, lakehouse, config)
        try:
            after = silver_versions(config)
        except Exception as exc:  # noqa: BLE001 - the job has committed: it succeeded
            # nothing announced: the next run that reads the tables announces these changes
            self.log.warning("silver tables not read after the run, no asset events: %s", exc)
            return
        changed = publish(
            context["outlet_events"][AssetAlias(SILVER_ALIAS)], lakehouse, before, after
        )
        self.log.info("silver tables changed since the last publication: %s", changed or "none")

    @staticmethod
    def _baseline(context: Any, lakehouse: str, config: str) -> dict[str, int]:
        from airflow.sdk import AssetAlias

        from protolake_support.tables import silver_versions

        events = context["inlet_events"][AssetAlias(SILVER_ALIAS)]
        return baseline(events, lakehouse, lambda: silver_versions(config))
