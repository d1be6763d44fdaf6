"""A class-data-sharing archive for the suite's Spark JVMs, and the Spark conf folder that uses it.

Every Spark JVM of the suite (each test process's session, every job run as a subprocess or
through spark-submit, DAG tasks, standalone masters, workers and executors) loads and links the
same twenty-odd thousand classes of Spark, Scala, Delta and Kafka at start-up. A dynamic CDS
archive (JDK 13+: ``-XX:ArchiveClassesAtExit`` once, ``-XX:SharedArchiveFile`` after) keeps
them parsed and verified in a file the JVMs map. Measured on 2 cores: a short application (a
session, three Delta appends, a read) took 15-19 s of JVM CPU without it, 11-15 s with it; the
machine's CPU over a whole test file, 296 s without and 212 s with it for the standalone
cluster on the object store (``tests/integration/s3/test_s3_cluster.py``), 263 s and 200 s
for the ingest DAG's two runs (``tests/integration/dags/test_ingest_dag.py``).

The JVM only shares classes whose class-path entries come before any non-empty folder, and
Spark puts its conf folder right after ``spark.driver.extraClassPath``: so the folder written
here puts Spark's own jars and the cached Kafka and Delta jars in ``extraClassPath`` (driver,
executor and, through ``SPARK_DAEMON_CLASSPATH``, the standalone daemons), which makes every
JVM's class path start with the same jars. A JVM whose class path differs (another
installation) runs without the archive; its CDS messages are off, so nothing reaches a job's
output.

``python -m tests.support.jvm_archive`` (``infra/run_tests.sh`` runs it before pytest) builds
``<run>/test-spark-conf`` when it is missing or stale: the suite's ``tests/spark-conf/
spark-defaults.conf`` plus the class path and the archive. ``tests/conftest.py`` uses that
folder when it is current, else ``tests/spark-conf``: the suite runs the same either way.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUITE_CONF_DIR = REPO / "tests" / "spark-conf"
JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
CLASS_PATH_KEYS = ("spark.driver.extraClassPath", "spark.executor.extraClassPath")
# the JVM reports a class path it cannot share on stdout, where jobs print their results
QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"
ARCHIVE = "classes.jsa"
STAMP = "stamp"


def folder() -> Path:
    """Where the conf folder and its archive live: ``<run>/test-spark-conf``."""
    run = Path(os.environ.get("PROTOLAKE_RUN_DIR", REPO / "run"))
    return (run if run.is_absolute() else REPO / run) / "test-spark-conf"


def class_path() -> str:
    """Spark's jars and the cached Kafka and Delta jars, as class-path wildcards."""
    from importlib.util import find_spec

    from pipelines.spark import DEFAULT_JAR_DIR

    pyspark = find_spec("pyspark")  # found, not imported: the unit tests' conftest reads this
    if pyspark is None or pyspark.origin is None:
        raise OSError("pyspark is not installed")
    spark_jars = Path(pyspark.origin).parent / "jars"
    return f"{spark_jars}/*:{DEFAULT_JAR_DIR}/*"


def _stamp() -> str:
    """What the archive depends on: the JDK, the jars (names, sizes, times) and the suite's
    Spark settings."""
    digest = hashlib.sha256()
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=True)
    digest.update(java.stderr.encode())
    digest.update((SUITE_CONF_DIR / "spark-defaults.conf").read_bytes())
    for entry in class_path().split(":"):
        for jar in sorted(Path(entry.rstrip("*")).glob("*.jar")):
            info = jar.stat()
            digest.update(f"{jar}:{info.st_size}:{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def current_conf_dir() -> Path | None:
    """The conf folder with the archive when it is built and current, else None."""
    out = folder()
    try:
        if (out / ARCHIVE).is_file() and (out / STAMP).read_text() == _stamp():
            return out
    except (OSError, subprocess.CalledProcessError):
        return None
    return None


def daemon_settings(conf_dir: Path) -> dict[str, str]:
    """``SPARK_DAEMON_JAVA_OPTS`` (and, with the archive, ``SPARK_DAEMON_CLASSPATH``) for the
    standalone masters and workers: the driver's JVM options of ``conf_dir``."""
    settings = read_settings(conf_dir)
    env = {"SPARK_DAEMON_JAVA_OPTS": settings[JAVA_OPTION_KEYS[0]]}
    if CLASS_PATH_KEYS[0] in settings:
        env["SPARK_DAEMON_CLASSPATH"] = settings[CLASS_PATH_KEYS[0]]
    return env


def read_settings(conf_dir: Path) -> dict[str, str]:
    """The settings of ``conf_dir/spark-defaults.conf``."""
    settings = {}
    for line in (conf_dir / "spark-defaults.conf").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition(" ")
            settings[key] = value.strip()
    return settings


def _write_conf(out: Path, archive_option: str) -> None:
    """``out/spark-defaults.conf``: the suite's settings, the class path, ``archive_option``."""
    lines = []
    for line in (SUITE_CONF_DIR / "spark-defaults.conf").read_text().splitlines():
        if line.startswith(JAVA_OPTION_KEYS):
            line = f"{line} {QUIET_CDS} {archive_option}"
        lines.append(line)
    lines += [f"{key} {class_path()}" for key in CLASS_PATH_KEYS]
    out.mkdir(parents=True, exist_ok=True)
    (out / "spark-defaults.conf").write_text("\n".join(lines) + "\n")


def build() -> Path:
    """Write the archive and the conf folder that uses it (about half a minute)."""
    out = folder()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    archive = out / ARCHIVE
    with tempfile.TemporaryDirectory() as scratch:
        dump_conf = Path(scratch) / "conf"
        _write_conf(dump_conf, f"-XX:ArchiveClassesAtExit={archive}")
        env = {**os.environ, "SPARK_CONF_DIR": str(dump_conf)}
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        # The JVM writes the archive as it exits, after the Python process: it shares the
        # stderr pipe, so reading the pipe to its end waits for the JVM too.
        run = subprocess.run(
            [sys.executable, "-m", "tests.support.jvm_archive_workload", scratch],
            cwd=REPO,
            env=env,
            timeout=600,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    if run.returncode != 0 or not archive.is_file():
        tail = "\n".join(run.stderr.splitlines()[-5:])
        raise RuntimeError(f"the JVM wrote no archive at {archive} (exit {run.returncode}): {tail}")
    _write_conf(out, f"-XX:SharedArchiveFile={archive}")
    (out / STAMP).write_text(_stamp())
    return out


def main() -> int:
    """Build the archive unless it is current; on failure the suite runs without it."""
    if current_conf_dir() is not None:
        print(f"jvm_archive: {folder()} is current")
        return 0
    started = time.monotonic()
    try:
        out = build()
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        print(f"jvm_archive: no class archive ({exc}); the suite runs without it", file=sys.stderr)
        shutil.rmtree(folder(), ignore_errors=True)
        return 0
    size = (out / ARCHIVE).stat().st_size // 2**20
    print(f"jvm_archive: {out / ARCHIVE} ({size} MB) in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
