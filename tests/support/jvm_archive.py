"""A class-data-sharing archive for the suite's Spark JVMs, and the Spark conf folder that uses it.

Every Spark JVM of the suite (each test process's session, every job run as a subprocess or
through spark-submit, DAG tasks, standalone masters, workers and executors) loads, parses and
links the same thousands of classes of Spark and Scala at start-up. A dynamic CDS archive
(JDK 13+: ``-XX:ArchiveClassesAtExit`` once, ``-XX:SharedArchiveFile`` after) keeps them parsed
and linked in a file the JVMs map. Measured on 2 cores, the machine's CPU over a test file:
the standalone cluster on the object store (``tests/integration/s3/test_s3_cluster.py``) 296 s
without it; the ingest DAG's two runs (``tests/integration/dags/test_ingest_dag.py``) 263 s.
The figures with it are in the project's notes and README.

The JDK archives a class only from a class-path entry before any non-empty folder, and Spark's
launcher puts its conf folder right after ``spark.driver.extraClassPath``. So the conf folder
written here names Spark's own jars in ``extraClassPath`` (driver and executors; the standalone
daemons through ``SPARK_DAEMON_CLASSPATH``): the same jars as before, only first. Delta, Kafka
and the S3 jars stay where deployments have them, in ``spark.jars`` (a child class loader),
so the suite still tests that placement; the archive does not hold their classes. A JVM whose
class path does not match the archive runs without it; every CDS message is off, so nothing
reaches a job's output.

``python -m tests.support.jvm_archive`` (``infra/run_tests.sh`` runs it before pytest) builds
the folder when none is current: the suite's ``tests/spark-conf/spark-defaults.conf`` plus the
class path and the archive, in ``<stamp>`` of :func:`archives_folder` (``jvm-archive`` in the
machine's cache, :func:`pipelines.machine_cache.machine_cache_dir`), where the stamp digests
what the archive depends on (the JDK, Spark's jars, the suite's settings, this module and its
workload). The JVM uses an archive only with the class path it was recorded with, path for path
and jar for jar, and a checkout's virtualenv has a path of its own: so the class path names a
copy of Spark's jars in the same cache (hard links where the file system allows), and every
checkout of the machine uses the archive that one recorded. ``tests/conftest.py`` uses the
current folder, else ``tests/spark-conf``: the same settings, without the archive.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pipelines.jobs import read_spark_defaults, spark_submit_path
from pipelines.machine_cache import machine_cache_dir
from tests.support.processes import run_in_own_session
from tests.support.stack import ROOT

SUITE_CONF_DIR = ROOT / "tests" / "spark-conf"
WORKLOAD = Path(__file__).with_name("jvm_archive_workload.py")
JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
CLASS_PATH_KEYS = ("spark.driver.extraClassPath", "spark.executor.extraClassPath")
# the JVM reports an archive it cannot use on stdout, where jobs print their results
QUIET_CDS = "-Xlog:cds*=off"
ARCHIVE = "classes.jsa"
RECORD_TIMEOUT = 300  # seconds; recording takes about a minute on 2 busy cores
# Folders of other stamps (another checkout's settings, an older JDK) and their jars are removed
# when no checkout has used them for this long; a folder is touched each time it is used.
KEEP_UNUSED_SECONDS = 7 * 24 * 3600
TAIL_BYTES = 65536
JARS_MANIFEST = "jars.manifest"  # the kept jars' sizes and times when the archive was recorded
LOCK = ".lock"
HEADER = (
    "# Written by tests/support/jvm_archive.py from tests/spark-conf/spark-defaults.conf "
    "(edit that one): the suite's settings, the class archive and the class path it needs."
)


def archives_folder() -> Path:
    """``jvm-archive`` in the machine's cache: a folder per stamp, and the jars they name."""
    return machine_cache_dir("jvm-archive")


def spark_jars() -> Path:
    """The jars of the Spark installation spark-submit runs (``$SPARK_HOME``, else pyspark's)."""
    return Path(spark_submit_path()).parents[1] / "jars"


def _jar_list(folder: Path | None = None) -> str:
    """The jars of ``folder`` (default: :func:`spark_jars`), a line each: name, size and a digest
    of the file's last :data:`TAIL_BYTES` (where a jar keeps the index of its entries, with their
    checksums). Which Spark they are, whatever folder they were installed in."""
    lines = []
    for jar in sorted((folder or spark_jars()).glob("*.jar")):
        size = jar.stat().st_size
        with jar.open("rb") as f:
            f.seek(max(0, size - TAIL_BYTES))
            tail = hashlib.sha256(f.read()).hexdigest()[:16]
        lines.append(f"{jar.name}:{size}:{tail}\n")
    return "".join(lines)


def _jar_times(folder: Path) -> str:
    """The jars of ``folder`` by name, size and modification time: what the JVM checks of each
    class-path entry before it uses the archive."""
    return "".join(
        f"{jar.name}:{info.st_size}:{info.st_mtime_ns}\n"
        for jar in sorted(folder.glob("*.jar"))
        for info in [jar.stat()]
    )


def kept_jars(jar_list: str | None = None) -> Path:
    """The folder of the machine's copy of Spark's jars (``jar_list``: :func:`_jar_list`, read
    when None)."""
    listing = _jar_list() if jar_list is None else jar_list
    digest = hashlib.sha256(listing.encode()).hexdigest()[:16]
    return archives_folder() / f"spark-jars-{digest}"


def keep_jars(jar_list: str | None = None) -> Path:
    """The machine's copy of Spark's jars, made when missing: hard links to the installed jars
    (a copy across file systems), so a file keeps the size and time the archive checks. The
    folder appears whole (a rename); one that exists is marked as used (``jar_list``:
    :func:`_jar_list`, read when None)."""
    target = kept_jars(jar_list)
    if target.is_dir():
        os.utime(target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".building-") as scratch:
        staged = Path(scratch) / "jars"
        staged.mkdir()
        for jar in sorted(spark_jars().glob("*.jar")):
            try:
                os.link(jar, staged / jar.name)
            except OSError:
                shutil.copy2(jar, staged / jar.name)
        staged.chmod(0o755)
        try:
            staged.rename(target)
        except OSError:  # another checkout's build made it first
            if not target.is_dir():
                raise
    return target


@contextmanager
def _building(root: Path) -> Iterator[None]:
    """One build at a time on the machine (an exclusive lock on ``root/.lock``)."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / LOCK).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _java() -> str:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on the path."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def stamp(jar_list: str | None = None) -> str:
    """A digest of what the archive depends on: the JDK, Spark's jars (:func:`_jar_list`, read
    when ``jar_list`` is None), the suite's Spark settings, this module and its workload."""
    digest = hashlib.sha256()
    java = subprocess.run(
        [_java(), "-version"], capture_output=True, text=True, check=True, timeout=30
    )
    digest.update(java.stderr.encode())
    for source in (SUITE_CONF_DIR / "spark-defaults.conf", Path(__file__), WORKLOAD):
        digest.update(source.read_bytes())
    digest.update((_jar_list() if jar_list is None else jar_list).encode())
    return digest.hexdigest()[:16]


def current_conf_dir() -> Path | None:
    """The conf folder with the archive when one is built for the current stamp and the kept
    jars it names are the files it was recorded with, else None."""
    try:
        listing = _jar_list()
        conf_dir = archives_folder() / stamp(listing)
        jars = kept_jars(listing)
        whole = (conf_dir / ARCHIVE).is_file() and (conf_dir / "spark-defaults.conf").is_file()
        if not (whole and jars.is_dir()):
            return None
        if (conf_dir / JARS_MANIFEST).read_text() != _jar_times(jars):
            return None  # the JVM would refuse the archive
    except (OSError, subprocess.SubprocessError):
        return None
    for used in (conf_dir, jars):  # in use: not removed as unused (KEEP_UNUSED_SECONDS)
        try:
            os.utime(used)
        except OSError:
            pass
    return conf_dir


def driver_jvm_options(conf_dir: Path, settings: dict[str, str] | None = None) -> str:
    """The driver JVM options of ``conf_dir/spark-defaults.conf`` (``settings``: already read)."""
    if settings is None:
        settings = read_spark_defaults(conf_dir / "spark-defaults.conf")
    options = settings.get(JAVA_OPTION_KEYS[0])
    if not options:
        raise AssertionError(f"{conf_dir}/spark-defaults.conf sets no driver JVM options")
    return options


def daemon_settings(conf_dir: Path) -> dict[str, str]:
    """``SPARK_DAEMON_JAVA_OPTS`` (and, with the archive, ``SPARK_DAEMON_CLASSPATH``) for the
    standalone masters and workers: the driver's JVM options and class path of ``conf_dir``."""
    settings = read_spark_defaults(conf_dir / "spark-defaults.conf")
    env = {"SPARK_DAEMON_JAVA_OPTS": driver_jvm_options(conf_dir, settings)}
    if settings.get(CLASS_PATH_KEYS[0]):
        env["SPARK_DAEMON_CLASSPATH"] = settings[CLASS_PATH_KEYS[0]]
    return env


def write_conf(conf_dir: Path, archive_option: str, jars: Path) -> None:
    """``conf_dir/spark-defaults.conf``: the suite's settings with ``archive_option`` (and the
    CDS messages off) added to the JVM options, and Spark's jars (the folder ``jars``, a copy of
    them) first on the class path."""
    lines = [HEADER]
    for line in (SUITE_CONF_DIR / "spark-defaults.conf").read_text().splitlines():
        if line.startswith(JAVA_OPTION_KEYS):
            line = f"{line} {QUIET_CDS} {archive_option}"
        lines.append(line)
    lines += [f"{key} {jars}/*" for key in CLASS_PATH_KEYS]
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text("\n".join(lines) + "\n")


def record(archive: Path, scratch: Path, jars: Path) -> None:
    """Run the workload in a JVM that writes ``archive`` as it exits, with Spark's jars of the
    folder ``jars`` first on its class path.

    Raises:
        RuntimeError: the workload failed, timed out or the JVM wrote no archive.
    """
    conf_dir = scratch / "conf"
    write_conf(conf_dir, f"-XX:ArchiveClassesAtExit={archive}", jars)
    env = {**os.environ, "SPARK_CONF_DIR": str(conf_dir), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    # The JVM writes the archive as it exits, after the Python process: it shares the stderr
    # pipe, so reading the pipe to its end waits for the JVM too. Its own session, so that a
    # timeout stops the JVM with it.
    try:
        proc = run_in_own_session(
            [sys.executable, "-m", "tests.support.jvm_archive_workload", str(scratch)],
            timeout=RECORD_TIMEOUT,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            errors="replace",
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the workload took more than {RECORD_TIMEOUT} s") from None
    stderr = proc.stderr
    if proc.returncode != 0 or not archive.is_file():
        tail = "\n".join(stderr.splitlines()[-5:])
        raise RuntimeError(f"the JVM wrote no archive (exit {proc.returncode}): {tail}")


def build() -> Path:
    """Record the archive and write the conf folder that uses it, for the current stamp; the
    folder appears whole (a rename). Folders no checkout used for :data:`KEEP_UNUSED_SECONDS`
    are removed. The caller holds the machine's build lock (:func:`main`)."""
    root = archives_folder()
    root.mkdir(parents=True, exist_ok=True)
    listing = _jar_list()
    conf_dir = root / stamp(listing)
    jars = keep_jars(listing)
    with tempfile.TemporaryDirectory(dir=root, prefix=".building-") as scratch:
        recorded = Path(scratch) / ARCHIVE
        record(recorded, Path(scratch), jars)
        staged = Path(scratch) / "staged"
        write_conf(staged, f"-XX:SharedArchiveFile={conf_dir / ARCHIVE}", jars)
        recorded.rename(staged / ARCHIVE)
        (staged / JARS_MANIFEST).write_text(_jar_times(jars))
        staged.chmod(0o755)
        if conf_dir.exists():  # stale (another JDK's answer, other jar times): out in one rename
            conf_dir.rename(Path(scratch) / "stale")
        staged.rename(conf_dir)
    remove_unused(root, keep={conf_dir, jars})
    return conf_dir


def remove_unused(root: Path, keep: set[Path]) -> None:
    """Remove what of ``root`` is not in ``keep`` and has not been used (its time) for
    :data:`KEEP_UNUSED_SECONDS`: the folders of other stamps, their jars, abandoned builds. A
    folder leaves in one rename before it is deleted, so nobody sees half of one."""
    oldest = time.time() - KEEP_UNUSED_SECONDS
    for other in root.iterdir():
        try:
            unused = other.name != LOCK and other not in keep and other.lstat().st_mtime < oldest
        except OSError:
            continue
        if not unused and not other.name.startswith(".removing-"):
            continue
        if other.is_dir() and not other.is_symlink():
            gone = (
                other if other.name.startswith(".removing-") else root / f".removing-{other.name}"
            )
            try:
                other.rename(gone)
            except OSError:
                continue
            shutil.rmtree(gone, ignore_errors=True)
        else:
            other.unlink(missing_ok=True)


def main() -> int:
    """Build the archive unless it is current; 1 when that fails (the suite then runs without
    it, only slower)."""
    current = current_conf_dir()
    if current is not None:
        print(f"jvm_archive: {current} is current")
        return 0
    started = time.monotonic()
    try:
        with _building(archives_folder()):
            # another checkout may have built it while this one waited for the lock
            conf_dir = current_conf_dir() or build()
    except Exception as exc:  # noqa: BLE001 - any failure leaves the suite its plain settings
        print(f"jvm_archive: no class archive ({exc}); the suite runs without it", file=sys.stderr)
        return 1
    size = (conf_dir / ARCHIVE).stat().st_size // 2**20
    print(f"jvm_archive: {conf_dir / ARCHIVE} ({size} MB) in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
