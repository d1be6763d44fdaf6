"""The conf folder of the suite's class archive (tests/support/jvm_archive.py): what it writes
for the JVMs and the standalone daemons. Building the archive itself needs a JVM: the Spark
tests check that the suite's session maps it (tests/spark/pipelines/test_spark_session.py)."""

from __future__ import annotations

from pathlib import Path

from tests.support import jvm_archive


def test_the_conf_keeps_the_suites_settings_and_adds_the_archive_and_class_path(
    tmp_path: Path,
) -> None:
    jvm_archive._write_conf(tmp_path, "-XX:SharedArchiveFile=/a/classes.jsa")

    suite = jvm_archive.read_settings(jvm_archive.SUITE_CONF_DIR)
    written = jvm_archive.read_settings(tmp_path)
    for key, value in suite.items():
        if key in jvm_archive.JAVA_OPTION_KEYS:
            assert written[key].split() == [
                *value.split(),
                *jvm_archive.QUIET_CDS.split(),
                "-XX:SharedArchiveFile=/a/classes.jsa",
            ]
        else:
            assert written[key] == value
    spark_jars, cached_jars = written["spark.driver.extraClassPath"].split(":")
    assert spark_jars.endswith("/pyspark/jars/*")
    assert cached_jars.endswith("/infra/.cache/jars/spark/*")
    assert written["spark.executor.extraClassPath"] == written["spark.driver.extraClassPath"]


def test_the_daemons_get_the_drivers_options_and_class_path(tmp_path: Path) -> None:
    jvm_archive._write_conf(tmp_path, "-XX:SharedArchiveFile=/a/classes.jsa")
    written = jvm_archive.read_settings(tmp_path)

    assert jvm_archive.daemon_settings(tmp_path) == {
        "SPARK_DAEMON_JAVA_OPTS": written["spark.driver.extraJavaOptions"],
        "SPARK_DAEMON_CLASSPATH": written["spark.driver.extraClassPath"],
    }
    # the suite's own folder has no class path to give them
    plain = jvm_archive.daemon_settings(jvm_archive.SUITE_CONF_DIR)
    assert set(plain) == {"SPARK_DAEMON_JAVA_OPTS"}
