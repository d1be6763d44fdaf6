"""The conf folder of the suite's class archive (tests/support/jvm_archive.py): what it writes
for the JVMs and the standalone daemons, when it counts as current, and what a failed build
leaves. Recording the archive needs a JVM: the Spark tests check that the suite's session maps
it (tests/spark/pipelines/test_spark_session.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import jvm_archive


def test_the_conf_keeps_the_suites_settings_and_adds_the_archive_and_class_path(
    tmp_path: Path,
) -> None:
    jvm_archive.write_conf(tmp_path, "-XX:SharedArchiveFile=/a/classes.jsa")

    suite = jvm_archive.read_spark_defaults(jvm_archive.SUITE_CONF_DIR / "spark-defaults.conf")
    written = jvm_archive.read_spark_defaults(tmp_path / "spark-defaults.conf")
    for key, value in suite.items():
        if key in jvm_archive.JAVA_OPTION_KEYS:
            assert written[key].split() == [
                *value.split(),
                *jvm_archive.QUIET_CDS.split(),
                "-XX:SharedArchiveFile=/a/classes.jsa",
            ]
        else:
            assert written[key] == value
    # Spark's jars only: Delta and Kafka stay in spark.jars, as deployments have them
    assert written["spark.driver.extraClassPath"] == f"{jvm_archive.spark_jars()}/*"
    assert written["spark.executor.extraClassPath"] == written["spark.driver.extraClassPath"]
    assert any(jvm_archive.spark_jars().glob("spark-core_*.jar"))


def test_the_daemons_get_the_drivers_options_and_class_path(tmp_path: Path) -> None:
    jvm_archive.write_conf(tmp_path, "-XX:SharedArchiveFile=/a/classes.jsa")
    written = jvm_archive.read_spark_defaults(tmp_path / "spark-defaults.conf")

    assert jvm_archive.daemon_settings(tmp_path) == {
        "SPARK_DAEMON_JAVA_OPTS": written["spark.driver.extraJavaOptions"],
        "SPARK_DAEMON_CLASSPATH": written["spark.driver.extraClassPath"],
    }
    # the suite's own folder has no class path to give them
    plain = jvm_archive.daemon_settings(jvm_archive.SUITE_CONF_DIR)
    assert set(plain) == {"SPARK_DAEMON_JAVA_OPTS"}


def _in_run_folder(monkeypatch: pytest.MonkeyPatch, run: Path, stamp: str) -> None:
    monkeypatch.setenv("PROTOLAKE_RUN_DIR", str(run))
    monkeypatch.setattr(jvm_archive, "stamp", lambda: stamp)


def test_only_a_whole_folder_of_the_current_stamp_is_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _in_run_folder(monkeypatch, tmp_path, "new")
    old = tmp_path / "test-spark-conf" / "old"
    jvm_archive.write_conf(old, "-XX:SharedArchiveFile=x")
    (old / jvm_archive.ARCHIVE).write_bytes(b"archive")
    assert jvm_archive.current_conf_dir() is None  # another stamp: stale

    new = tmp_path / "test-spark-conf" / "new"
    jvm_archive.write_conf(new, "-XX:SharedArchiveFile=x")
    assert jvm_archive.current_conf_dir() is None  # no archive yet
    (new / jvm_archive.ARCHIVE).write_bytes(b"archive")
    assert jvm_archive.current_conf_dir() == new


def test_a_failed_build_says_so_and_leaves_no_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _in_run_folder(monkeypatch, tmp_path, "new")

    def no_archive(archive: Path, scratch: Path) -> None:
        raise RuntimeError("the JVM wrote no archive (exit 1): boom")

    monkeypatch.setattr(jvm_archive, "record", no_archive)

    assert jvm_archive.main() == 1
    assert "no class archive (the JVM wrote no archive (exit 1): boom)" in capsys.readouterr().err
    assert jvm_archive.current_conf_dir() is None
    assert [p.name for p in (tmp_path / "test-spark-conf").iterdir()] == []


def test_a_build_replaces_the_folders_of_other_stamps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _in_run_folder(monkeypatch, tmp_path, "new")
    stale = tmp_path / "test-spark-conf" / "old"
    stale.mkdir(parents=True)

    def fake_record(archive: Path, scratch: Path) -> None:
        archive.write_bytes(b"archive")

    monkeypatch.setattr(jvm_archive, "record", fake_record)

    built = jvm_archive.build()

    assert built == tmp_path / "test-spark-conf" / "new"
    assert sorted(p.name for p in built.parent.iterdir()) == ["new"]
    assert jvm_archive.current_conf_dir() == built
    options = jvm_archive.driver_jvm_options(built)
    assert f"-XX:SharedArchiveFile={built / jvm_archive.ARCHIVE}" in options.split()
