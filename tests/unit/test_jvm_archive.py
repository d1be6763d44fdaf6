"""The conf folder of the suite's class archive (tests/support/jvm_archive.py): what it writes
for the JVMs and the standalone daemons, when it counts as current, and what a failed build
leaves. Recording the archive needs a JVM: the Spark tests check that the suite's session maps
it (tests/spark/pipelines/test_spark_session.py)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.support import jvm_archive


def _spark_jars(monkeypatch: pytest.MonkeyPatch, folder: Path, **jars: bytes) -> Path:
    """Spark's jars for these tests: small files in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in jars.items():
        (folder / f"{name}.jar").write_bytes(content)
    monkeypatch.setattr(jvm_archive, "spark_jars", lambda: folder)
    return folder


def _in_cache(monkeypatch: pytest.MonkeyPatch, cache: Path, stamp: str) -> Path:
    """The machine's cache in ``cache``, the current stamp ``stamp``; the archives' folder."""
    monkeypatch.setenv("PROTOLAKE_SHARED_CACHE", str(cache))
    monkeypatch.setattr(jvm_archive, "stamp", lambda jar_list=None: stamp)
    _spark_jars(monkeypatch, cache.parent / "venv-jars", **{"spark-core_2.13-4.2.0": b"core"})
    return cache / "jvm-archive"


def test_the_conf_keeps_the_suites_settings_and_adds_the_archive_and_class_path(
    tmp_path: Path,
) -> None:
    jvm_archive.write_conf(tmp_path, "-XX:SharedArchiveFile=/a/classes.jsa", Path("/kept/jars"))

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
    assert written["spark.driver.extraClassPath"] == "/kept/jars/*"
    assert written["spark.executor.extraClassPath"] == written["spark.driver.extraClassPath"]


def test_the_daemons_get_the_drivers_options_and_class_path(tmp_path: Path) -> None:
    jvm_archive.write_conf(tmp_path, "-XX:SharedArchiveFile=/a/classes.jsa", Path("/kept/jars"))
    written = jvm_archive.read_spark_defaults(tmp_path / "spark-defaults.conf")

    assert jvm_archive.daemon_settings(tmp_path) == {
        "SPARK_DAEMON_JAVA_OPTS": written["spark.driver.extraJavaOptions"],
        "SPARK_DAEMON_CLASSPATH": written["spark.driver.extraClassPath"],
    }
    # the suite's own folder has no class path to give them
    plain = jvm_archive.daemon_settings(jvm_archive.SUITE_CONF_DIR)
    assert set(plain) == {"SPARK_DAEMON_JAVA_OPTS"}


def test_the_kept_jars_are_links_to_the_installed_ones_and_named_by_which_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROTOLAKE_SHARED_CACHE", str(tmp_path / "cache"))
    installed = _spark_jars(monkeypatch, tmp_path / "a", **{"spark-core": b"core", "scala": b"s"})

    kept = jvm_archive.keep_jars()

    assert kept.parent == tmp_path / "cache" / "jvm-archive"
    assert sorted(p.name for p in kept.iterdir()) == ["scala.jar", "spark-core.jar"]
    for jar in installed.iterdir():  # the same file: the size and time the archive checks
        assert (kept / jar.name).stat().st_ino == jar.stat().st_ino
    # the same jars installed in another checkout's folder: the same kept folder
    _spark_jars(monkeypatch, tmp_path / "b", **{"spark-core": b"core", "scala": b"s"})
    assert jvm_archive.keep_jars() == kept
    # other jars (another Spark): another folder
    _spark_jars(monkeypatch, tmp_path / "c", **{"spark-core": b"core 2", "scala": b"s"})
    assert jvm_archive.kept_jars() != kept


def test_only_a_whole_folder_of_the_current_stamp_is_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _in_cache(monkeypatch, tmp_path / "cache", "new")
    jars = jvm_archive.keep_jars()
    old = root / "old"
    jvm_archive.write_conf(old, "-XX:SharedArchiveFile=x", jars)
    (old / jvm_archive.ARCHIVE).write_bytes(b"archive")
    assert jvm_archive.current_conf_dir() is None  # another stamp: stale

    new = root / "new"
    jvm_archive.write_conf(new, "-XX:SharedArchiveFile=x", jars)
    (new / jvm_archive.JARS_MANIFEST).write_text(jvm_archive._jar_times(jars))
    assert jvm_archive.current_conf_dir() is None  # no archive yet
    (new / jvm_archive.ARCHIVE).write_bytes(b"archive")
    assert jvm_archive.current_conf_dir() == new
    # a kept jar whose time changed: the JVM would refuse the archive
    jar = next(jars.glob("*.jar"))
    os.utime(jar, (1, 1))
    assert jvm_archive.current_conf_dir() is None
    (new / jvm_archive.JARS_MANIFEST).write_text(jvm_archive._jar_times(jars))
    assert jvm_archive.current_conf_dir() == new
    shutil.rmtree(jars)
    assert jvm_archive.current_conf_dir() is None  # the jars its class path names are gone


def test_a_failed_build_says_so_and_leaves_no_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _in_cache(monkeypatch, tmp_path / "cache", "new")

    def no_archive(archive: Path, scratch: Path, jars: Path) -> None:
        raise RuntimeError("the JVM wrote no archive (exit 1): boom")

    monkeypatch.setattr(jvm_archive, "record", no_archive)

    assert jvm_archive.main() == 1
    assert "no class archive (the JVM wrote no archive (exit 1): boom)" in capsys.readouterr().err
    assert jvm_archive.current_conf_dir() is None
    assert sorted(p.name for p in root.iterdir()) == [
        jvm_archive.LOCK,
        jvm_archive.kept_jars().name,
    ]


def test_a_build_removes_what_no_checkout_used_for_a_week(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _in_cache(monkeypatch, tmp_path / "cache", "new")
    week_ago = time.time() - jvm_archive.KEEP_UNUSED_SECONDS - 60
    for name in ("old", "spark-jars-old", "recent", ".removing-half"):
        (root / name).mkdir(parents=True)
    for name in ("old", "spark-jars-old"):
        os.utime(root / name, (week_ago, week_ago))
    recorded: list[Path] = []

    def fake_record(archive: Path, scratch: Path, jars: Path) -> None:
        recorded.append(jars)
        archive.write_bytes(b"archive")

    monkeypatch.setattr(jvm_archive, "record", fake_record)

    built = jvm_archive.build()

    jars = jvm_archive.kept_jars()
    assert built == root / "new"
    assert recorded == [jars]  # recorded with the class path the conf names
    assert sorted(p.name for p in root.iterdir()) == sorted(["new", "recent", jars.name])
    assert jvm_archive.current_conf_dir() == built
    settings = jvm_archive.read_spark_defaults(built / "spark-defaults.conf")
    options = jvm_archive.driver_jvm_options(built, settings)
    assert f"-XX:SharedArchiveFile={built / jvm_archive.ARCHIVE}" in options.split()
    assert settings["spark.driver.extraClassPath"] == f"{jars}/*"
    assert (built / jvm_archive.JARS_MANIFEST).read_text() == jvm_archive._jar_times(jars)


def test_spark_jars_of_the_same_names_and_sizes_but_other_content_are_other_jars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROTOLAKE_SHARED_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(jvm_archive, "_java", lambda: "true")  # no JVM in the unit tests
    _spark_jars(monkeypatch, tmp_path / "a", **{"spark-core": b"core 1"})
    first = (jvm_archive.kept_jars(), jvm_archive.stamp())
    _spark_jars(monkeypatch, tmp_path / "b", **{"spark-core": b"core 2"})
    assert jvm_archive.kept_jars() != first[0]
    assert jvm_archive.stamp() != first[1]
