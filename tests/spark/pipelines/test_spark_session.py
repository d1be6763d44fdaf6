"""pipelines.spark.build_session in-process: the Python workers run this interpreter; the Delta
tables the session creates get the lakehouse's checkpoint interval; a local session's JVM runs
the client compiler alone.

Without it they run whichever ``python3`` comes first on PATH; when that one lacks protobuf,
every decode in a worker fails with ImportError for ``google.protobuf.descriptor_pb2``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def test_python_workers_run_this_interpreter(spark: Any) -> None:
    def interpreter(_: Any) -> Iterator[tuple[str, str]]:
        import sys

        yield sys.executable, sys.prefix

    chosen = os.environ.get("PYSPARK_PYTHON") or sys.executable
    assert spark.sparkContext.pythonExec == chosen
    [(executable, prefix)] = (
        spark.sparkContext.parallelize([0], 1).mapPartitions(interpreter).collect()
    )
    assert (executable, prefix) == (chosen, sys.prefix)


def test_the_callers_environment_is_left_as_it_was(spark: Any) -> None:
    # the interpreter is chosen for the SparkContext only: later subprocesses (spark-submit,
    # Airflow tasks) must not inherit a PYSPARK_PYTHON nobody set
    from pipelines.spark import build_session

    before = os.environ.get("PYSPARK_PYTHON")
    build_session("spark-session-unit-tests")
    assert os.environ.get("PYSPARK_PYTHON") == before


def test_a_local_master_keeps_its_loopback_and_small_machine_settings(spark: Any) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.master").startswith("local")
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.ui.enabled") == "false"
    assert os.environ.get("SPARK_LOCAL_IP")


JVM_ARGUMENTS = """
from pipelines.spark import build_session
spark = build_session("jvm-options")
bean = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
print("ARGS", " ".join(bean.getInputArguments()))
"""


def test_an_in_process_local_session_runs_the_client_compiler_and_logs_quietly(
    tmp_path: Path,
) -> None:
    # a session started as a job starts it, without the suite's spark-defaults.conf (which
    # names JVM options of its own, and so keeps them)
    from pipelines.spark import LOCAL_JVM_OPTIONS

    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    env["SPARK_CONF_DIR"] = str(conf_dir)
    done = subprocess.run(
        [sys.executable, "-c", JVM_ARGUMENTS],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [x for x in done.stdout.splitlines() if x.startswith("ARGS ")]
    assert set(LOCAL_JVM_OPTIONS.split()) <= set(line.split()), line
    # the driver logs with pipelines/log4j2.properties: none of Spark's start-up lines
    for noise in ("Using Spark's default log4j profile", "NativeCodeLoader", "setLogLevel"):
        assert noise not in done.stderr, done.stderr[-3000:]


def _checkpoint_interval(spark: Any, path: str) -> str | None:
    row = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    return dict(row["properties"]).get("delta.checkpointInterval")


def test_the_tables_a_session_creates_checkpoint_every_hundred_commits(
    spark: Any, tmp_path: Path
) -> None:
    from delta.tables import DeltaTable

    from lakehouse.delta import CHECKPOINT_INTERVAL

    written = str(tmp_path / "written")
    spark.range(3).write.format("delta").save(written)
    created = str(tmp_path / "created")
    DeltaTable.create(spark).location(created).addColumn("id", "BIGINT").execute()
    assert _checkpoint_interval(spark, written) == str(CHECKPOINT_INTERVAL) == "100"
    assert _checkpoint_interval(spark, created) == "100"


def test_an_interval_the_settings_name_wins(spark: Any, tmp_path: Path) -> None:
    from lakehouse.delta import CHECKPOINT_INTERVAL_DEFAULT, use_table_defaults

    before = spark.conf.get(CHECKPOINT_INTERVAL_DEFAULT)
    spark.conf.set(CHECKPOINT_INTERVAL_DEFAULT, "25")
    try:
        use_table_defaults(spark)
        assert spark.conf.get(CHECKPOINT_INTERVAL_DEFAULT) == "25"
        path = str(tmp_path / "t")
        spark.range(3).write.format("delta").save(path)
        assert _checkpoint_interval(spark, path) == "25"
        spark.conf.unset(CHECKPOINT_INTERVAL_DEFAULT)
        use_table_defaults(spark)  # none named: the lakehouse's
        assert spark.conf.get(CHECKPOINT_INTERVAL_DEFAULT) == "100"
    finally:
        spark.conf.set(CHECKPOINT_INTERVAL_DEFAULT, before)


def test_the_suites_jvm_runs_with_the_suites_jvm_options(spark: Any) -> None:
    # tests/spark-conf/spark-defaults.conf reaches a driver started in-process (through
    # pyspark's spark-submit), not only the jobs the suite submits
    from tests.conftest import suite_jvm_options

    bean = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(bean.getInputArguments())
    assert set(suite_jvm_options().split()) <= set(arguments), arguments
    # and so do its SQL settings: interpreted expressions, no whole-stage code generation,
    # no adaptive re-planning
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
    assert spark.conf.get("spark.sql.adaptive.enabled") == "false"


def test_building_a_column_is_one_jvm_call_per_function(spark: Any, monkeypatch: Any) -> None:
    # pipelines.spark.SESSION_CONF turns PySpark's DataFrame debugging off: with it on, a
    # column method such as cast also fetches the active session, reads a setting, and sets
    # and clears its Python call site in the JVM
    import py4j.java_gateway
    from pyspark.sql import functions as F  # noqa: N812

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    calls: list[str] = []
    call = py4j.java_gateway.JavaMember.__call__

    def counted(member: Any, *args: Any) -> Any:
        calls.append(member.name)
        return call(member, *args)

    F.lit(7).cast("int")  # the first column of a process also reads the setting, once
    monkeypatch.setattr(py4j.java_gateway.JavaMember, "__call__", counted)
    F.lit(7).cast("int")
    assert calls == ["lit", "cast"]


def test_the_suites_jvm_maps_the_class_archive_when_the_suite_built_it(spark: Any) -> None:
    # infra/run_tests.sh builds the archive (tests/support/jvm_archive.py); a JVM whose class
    # path does not match it runs without it, silently, so this checks that it is really used
    from tests.conftest import TEST_SPARK_CONF_DIR
    from tests.support import jvm_archive

    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    mapped = {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()}
    archive = (TEST_SPARK_CONF_DIR / jvm_archive.ARCHIVE).resolve()
    with_archive = Path(os.environ["SPARK_CONF_DIR"]).resolve() == TEST_SPARK_CONF_DIR.resolve()
    assert (str(archive) in mapped) == (with_archive and archive.is_file()), TEST_SPARK_CONF_DIR
