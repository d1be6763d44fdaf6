"""Build the SparkSession every protolake job uses, in-process or under spark-submit.

The JVM jars Spark lacks (Kafka source, Delta, and the ``s3a://`` file system: hadoop-aws with
the AWS SDK modules it uses) come from the cache that ``infra/fetch_jars.sh`` fills; under spark-submit the caller passes ``--jars`` itself and this module adds nothing.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyspark loads slowly; find_spark_jars (used by DAGs) must not need it
    from pyspark.sql import SparkSession

# py4j logs every command it sends to the JVM at DEBUG, arguments included: a Kafka source's
# `kafka.sasl.jaas.config` or a registry password would reach the logs of anyone who turns
# DEBUG on. Its DEBUG and INFO are connection noise: WARNING unless someone chose a level.
if logging.getLogger("py4j").level == logging.NOTSET:
    logging.getLogger("py4j").setLevel(logging.WARNING)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_JAR_DIR = REPO_ROOT / "infra" / ".cache" / "jars" / "spark"
DEFAULT_S3_JAR_DIR = REPO_ROOT / "infra" / ".cache" / "jars" / "s3"

DELTA_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}

# Settings of every session, before the caller's. PySpark's DataFrame debugging (on by
# default) makes every column function also record its Python call site in the JVM, for the
# query context of error messages: a Python stack walk and several more JVM round trips per
# call. A silver batch builds thousands of columns on its driver threads (frame heads as
# literals, quarantine rows, alignment to a table's schema): building 100 columns of 20 cast
# literals took 17,104 Py4J calls and 2.6 s with it, 6,604 calls and 1.4 s without; silver on
# four tables of 500 records, the driver's Python CPU 9.2-9.4 s with it, 4.7-5.3 s without.
# Spark's own error messages and their query context stay.
SESSION_CONF: dict[str, str] = {
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}

# Settings for a small local master (in-process, or spark-submit --master local[N], where
# pipelines.jobs.submit_command and the DAGs' operator pass them), with the JVM's options
# below: local_conf(). A cluster keeps its own.
LOCAL_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Delta rebuilds a table's state with this many tasks; 50 (its default) is for clusters.
    "spark.databricks.delta.snapshotPartitions": "2",
}

# The JVM of a local master: the client compiler (C1) alone, without the optimising one (C2),
# and the code cache Spark's generated code needs then (C1 alone reserves 48 MB, which a stream
# fills in minutes). On one machine the JIT compilers' threads take the same cores as the
# job: C2's code pays off in long runs on spare cores, and on 2 cores beside a second job it
# took a quarter to two thirds of a job's JVM CPU for minutes after every start. Measured with
# bench/freshness_bench.py (bronze and silver streams, 100 records/s, 2 cores, two runs each;
# docs/streaming.md): silver's start-up 36-38 s instead of 48-56 s, freshness p95 47-52 s
# instead of 69-86 s.
LOCAL_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# The driver's log of a command's in-process local session: Spark's defaults at WARN, without
# the start-up lines a user can do nothing about (pipelines/log4j2.properties).
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
DRIVER_JVM_OPTIONS = "spark.driver.extraJavaOptions"
# spark-submit puts spark.driver.defaultJavaOptions (an administrator's) before extraJavaOptions
JVM_OPTION_KEYS = (DRIVER_JVM_OPTIONS, "spark.driver.defaultJavaOptions")

# Spark's default `spark.redaction.regex` is (?i)secret|password|token|access[.]?key. The
# Spark provider passes a job's environment as spark.kubernetes.driverEnv.* / spark.yarn.
# appMasterEnv.* settings, so PROTOLAKE_REGISTRY_AUTH (user:pass) would show in the UI and the
# event log: also redact what pipelines.settings treats as secret (auth, jaas, credential).
REDACTION_REGEX = r"(?i)secret|password|token|access[.]?key|auth|jaas|credential"


def local_conf() -> dict[str, str]:
    """The settings of a local master: :data:`LOCAL_CONF`, and :data:`LOCAL_JVM_OPTIONS` as the
    driver's JVM options unless ``spark-defaults.conf`` names driver JVM options
    (``spark.driver.extraJavaOptions`` or ``defaultJavaOptions``; ``$SPARK_CONF_DIR``, else the
    installation's ``conf/``: what spark-submit reads). A caller's own settings, applied after
    these, win as well."""
    from pipelines.jobs import read_spark_defaults, spark_conf_dir

    try:
        defaults = read_spark_defaults(spark_conf_dir() / "spark-defaults.conf")
    except OSError:  # no file (or no spark-submit to find it by): no choice was made there
        defaults = {}
    if any(key in defaults for key in JVM_OPTION_KEYS):
        return dict(LOCAL_CONF)
    return {**LOCAL_CONF, DRIVER_JVM_OPTIONS: LOCAL_JVM_OPTIONS}


def _quiet_log(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with :data:`LOG_CONFIG` as the driver's log configuration, when ``conf`` holds
    protolake's own JVM options (:func:`local_conf`), no ``log4j2.properties`` of an
    administrator's is in the Spark conf folder, and the path needs no quoting. Only for a
    session started in-process: spark-submit's jobs (the DAGs') keep Spark's INFO log."""
    from pipelines.jobs import spark_conf_dir

    options = conf.get(DRIVER_JVM_OPTIONS)
    if options != LOCAL_JVM_OPTIONS or any(c.isspace() for c in str(LOG_CONFIG)):
        return conf
    try:
        if (spark_conf_dir() / "log4j2.properties").exists():
            return conf
    except OSError:  # no spark-submit to find the folder by
        pass
    return {**conf, DRIVER_JVM_OPTIONS: f"{options} -Dlog4j2.configurationFile=file:{LOG_CONFIG}"}


def configured(spark: SparkSession, key: str) -> bool:
    """Whether the job set ``key`` itself: at launch (``[spark.conf]``, ``spark-submit --conf``,
    ``spark-defaults.conf``, which the session's settings include) or since
    (``spark.conf.set``), rather than leaving it to Spark's default."""
    return spark.conf.get(key, None) is not None


def set_for_query(main: SparkSession, session: SparkSession, settings: Mapping[str, str]) -> None:
    """Set ``settings`` on ``session``, a streaming query's own (the micro-batch DataFrame's
    ``sparkSession``), each only where it differs. The job's session ``main`` is left alone:
    a batch read through it (replay's) keeps the job's settings."""
    if session._jsparkSession.equals(main._jsparkSession):
        return
    for key, value in settings.items():
        if session.conf.get(key, None) != value:
            session.conf.set(key, value)


def is_local_master(master: str) -> bool:
    """True for ``local``, ``local[N]``, ``local[*]`` and ``local-cluster[...]``: every
    process of the application on this host, where loopback addresses are right."""
    return master.startswith("local")


def find_spark_jars(jar_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Return the cached JVM jars (Kafka source, Delta; then the S3A jars) as absolute paths.

    The S3A jars (``$PROTOLAKE_S3_JARS_DIR``, default ``infra/.cache/jars/s3``) are added when
    that folder has them: every session can then read and write ``s3a://`` paths, and
    spark-submit ships them to the executors with the others.

    Raises:
        FileNotFoundError: the cache is empty; run ``make setup`` (``infra/fetch_jars.sh``).
    """
    folder = Path(jar_dir or os.environ.get("PROTOLAKE_SPARK_JARS_DIR") or DEFAULT_JAR_DIR)
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if not jars:
        raise FileNotFoundError(
            f"no Spark jars in {folder}: run `make setup` (infra/fetch_jars.sh) first"
        )
    s3_folder = Path(os.environ.get("PROTOLAKE_S3_JARS_DIR") or DEFAULT_S3_JAR_DIR)
    return jars + sorted(str(p) for p in s3_folder.glob("*.jar"))


def build_session(
    app_name: str,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return a SparkSession with Delta Lake and the Kafka source on its classpath.

    Args:
        app_name: the application name shown by Spark.
        master: a Spark master URL; None keeps what spark-submit set, else ``local[2]``.
        conf: extra Spark settings, applied last.

    Only a local master gets :func:`local_conf` and ``SPARK_LOCAL_IP=127.0.0.1`` (unless set):
    a cluster's executors must reach the driver at an address they can route to. The Delta
    tables the session creates get the lakehouse's checkpoint interval unless the settings
    name one (``lakehouse.delta.use_table_defaults``).
    """
    from pyspark.sql import SparkSession

    from lakehouse.delta import use_table_defaults

    builder = SparkSession.builder.appName(app_name)
    under_submit = "spark.master" in _submitted_conf()
    if not under_submit:
        chosen = master or os.environ.get("PROTOLAKE_SPARK_MASTER", "local[2]")
        builder = builder.master(chosen)
        builder = builder.config("spark.jars", ",".join(find_spark_jars()))
        if is_local_master(chosen):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            for key, value in _quiet_log(local_conf()).items():
                builder = builder.config(key, value)
        # In-process, Python workers must run this interpreter (the one that has codec and
        # pipelines), not whichever python3 comes first on PATH.
        python = os.environ.get("PYSPARK_PYTHON") or sys.executable
        builder = builder.config("spark.pyspark.python", python)
    elif master:
        builder = builder.master(master)
    for key, value in {**DELTA_CONF, **SESSION_CONF}.items():
        builder = builder.config(key, value)
    builder = builder.config("spark.sql.session.timeZone", "UTC")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    if under_submit or os.environ.get("PYSPARK_PYTHON"):
        session = builder.getOrCreate()
    else:
        session = _create_with_this_python(builder)
    use_table_defaults(session)
    return session


def _create_with_this_python(builder: SparkSession.Builder) -> SparkSession:
    """``builder.getOrCreate()`` with this interpreter as the workers' Python.

    spark.pyspark.python is read by spark-submit only. An in-process SparkContext takes its
    workers' Python from PYSPARK_PYTHON when it is created (SparkContext.pythonExec, else
    "python3" from PATH: maybe an interpreter without protobuf, whose `google.protobuf` then
    resolves to the .proto files inside spark-core's jar). Set it for the creation only, so
    that subprocesses started later still see the caller's environment.
    """
    saved = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    try:
        return builder.getOrCreate()
    finally:
        if saved is None:
            del os.environ["PYSPARK_PYTHON"]
        else:
            os.environ["PYSPARK_PYTHON"] = saved


def _submitted_conf() -> dict[str, str]:
    """Settings spark-submit passed to this Python process (empty when run in-process)."""
    raw = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    if os.environ.get("SPARK_ENV_LOADED") or "SPARK_SUBMIT_OPTS" in os.environ:
        return {"spark.master": "submitted"}
    return {"spark.master": "submitted"} if "--master" in raw else {}
