"""spark-submit entry points and the helper that builds their command line.

``pipelines/jobs/run.py`` is the script spark-submit runs; it calls :func:`pipelines.cli.main`,
so ``spark-submit ... pipelines/jobs/run.py bronze --config FILE`` and
``protolake bronze --config FILE`` run the same code. :func:`submit_command` builds that line:

    spark-submit [--master URL] --jars <cached jars> --py-files <protolake zip>
        [--conf k=v ...] pipelines/jobs/run.py <subcommand> --config FILE [args...]

- spark-submit is ``$SPARK_HOME/bin/spark-submit`` when SPARK_HOME is set, else pyspark's own
  (the one in the virtualenv);
- the jars are ``pipelines.spark.find_spark_jars()`` (Kafka source, Delta; from
  ``infra/fetch_jars.sh``'s cache);
- the zip holds the packages of :data:`PACKAGES` (codec, lakehouse, pipelines, quality); it is
  rebuilt only when their content changes, under ``$PROTOLAKE_CACHE_DIR/py-files`` (default
  ``infra/.cache/py-files`` in a checkout, else ``~/.cache/protolake/py-files``);
- local-master settings (``pipelines.spark.local_conf``: loopback driver address, no UI, the
  JVM's client compiler alone unless ``spark-defaults.conf`` names JVM options) and
  this interpreter as the default Python go only to a local master. Without ``master``, the
  master is the one spark-submit will use (:func:`default_master`: ``spark.master`` in
  ``conf``, else in ``spark-defaults.conf``, else ``$MASTER``, else ``local[*]``); when that
  file cannot be read the master is unknown and the local settings are left out.

This module imports neither pyspark nor Airflow, so a DAG file may call it at parse time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

# package -> which of its files to ship. The lakehouse package only by its modules: a lakehouse
# written at the default path (./lakehouse, from the repository's root) shares its folder.
PACKAGES = {"codec": "*", "lakehouse": "*.py", "pipelines": "*", "quality": "*"}
REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_SCRIPT = Path(__file__).resolve().parent / "run.py"
_ZIP_DATE = (2000, 1, 1, 0, 0, 0)  # fixed: the same sources give the same zip


def spark_submit_path() -> str:
    """``$SPARK_HOME/bin/spark-submit``, else the one shipped inside the pyspark package.

    Raises:
        FileNotFoundError: neither exists.
    """
    spark_home = os.environ.get("SPARK_HOME")
    if spark_home:
        candidate = Path(spark_home) / "bin" / "spark-submit"
    else:
        spec = importlib.util.find_spec("pyspark")
        if spec is None or spec.origin is None:
            raise FileNotFoundError(
                "spark-submit: SPARK_HOME is unset and pyspark is not installed"
            )
        candidate = Path(spec.origin).parent / "bin" / "spark-submit"
    if not candidate.is_file():
        raise FileNotFoundError(f"spark-submit not found at {candidate}")
    return str(candidate)


def cache_dir() -> Path:
    """Where built artefacts (the py-files zip) are kept."""
    env = os.environ.get("PROTOLAKE_CACHE_DIR")
    if env:
        return Path(env)
    if (REPO_ROOT / "infra").is_dir():
        return REPO_ROOT / "infra" / ".cache"
    return Path.home() / ".cache" / "protolake"


def _package_files() -> list[tuple[str, Path]]:
    files: list[tuple[str, Path]] = []
    for package, pattern in PACKAGES.items():
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"package {package!r} is not importable")
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(root.rglob(pattern)):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.append((f"{package}/{path.relative_to(root).as_posix()}", path))
    return files


def build_py_files(target_dir: str | os.PathLike[str] | None = None) -> str:
    """Zip the project's packages (:data:`PACKAGES`) for ``--py-files``; return the zip's path.

    The name carries a hash of the content, so an unchanged tree reuses the zip and a changed
    one never reuses a stale zip.
    """
    files = _package_files()
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.encode("utf-8") + b"\0" + path.read_bytes() + b"\0")
    folder = Path(target_dir) if target_dir is not None else cache_dir() / "py-files"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"protolake-{digest.hexdigest()[:16]}.zip"
    if target.is_file():
        return str(target)
    partial = folder / f".{target.name}.{os.getpid()}.tmp"
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, path in files:
            info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    os.replace(partial, target)  # atomic: a concurrent builder never sees half a zip
    return str(target)


def spark_conf_dir() -> Path:
    """The folder whose ``spark-defaults.conf`` spark-submit reads: ``$SPARK_CONF_DIR``, else
    ``conf/`` of the Spark installation :func:`spark_submit_path` belongs to."""
    env = os.environ.get("SPARK_CONF_DIR")
    if env:
        return Path(env)
    return Path(spark_submit_path()).parent.parent / "conf"


_PROPERTY = re.compile(r"^\s*([^\s=:]+)\s*[=:\s]\s*(.*?)\s*$")


def read_spark_defaults(path: Path) -> dict[str, str]:
    """The settings of a ``spark-defaults.conf`` as spark-submit reads them (a
    ``java.util.Properties`` file: ``key value``, ``key=value`` or ``key: value``; ``#`` and
    ``!`` start comments; the last value of a key wins, a key without a value is left out).

    Raises:
        OSError: the file cannot be read (FileNotFoundError when it does not exist).
    """
    settings = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.lstrip().startswith(("#", "!")):
            continue
        match = _PROPERTY.match(line)
        if match and match.group(2):  # a key without a value sets nothing
            settings[match.group(1)] = match.group(2)
    return settings


def default_master(conf: Mapping[str, str] | None = None) -> str | None:
    """The master spark-submit uses when no ``--master`` is given, or None if unknown.

    spark-submit takes ``spark.master`` from ``--conf``, then from ``spark-defaults.conf`` (in
    :func:`spark_conf_dir`), then ``$MASTER``, and defaults to ``local[*]``. None: the file
    exists but cannot be read.
    """
    if conf and conf.get("spark.master"):
        return conf["spark.master"]
    try:
        found = read_spark_defaults(spark_conf_dir() / "spark-defaults.conf").get("spark.master")
    except FileNotFoundError:
        found = None
    except OSError:
        return None
    return found or os.environ.get("MASTER") or "local[*]"


def submit_command(
    subcommand: str,
    config: str | os.PathLike[str],
    master: str | None = None,
    *,
    args: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
    python: str | None = None,
) -> list[str]:
    """The spark-submit command line that runs ``protolake <subcommand> --config <config>``.

    Args:
        subcommand: a ``protolake`` command (``bronze``, ``silver``, ...).
        config: the TOML configuration file (a path the driver can read: client deploy mode).
        master: ``--master`` URL; None leaves it to spark-submit (:func:`default_master`).
        args: extra arguments for the subcommand (``["--trigger", "available-now"]``).
        conf: extra ``--conf key=value`` settings (with a local master, on top of
            ``pipelines.spark.local_conf``: small machine, no UI, loopback driver address).
        python: the Python for driver and executors; default: this interpreter when the
            master is local, else whatever the cluster is configured with.

    Raises:
        FileNotFoundError: spark-submit, the cached jars or a package cannot be found.
    """
    from pipelines.spark import find_spark_jars, is_local_master, local_conf

    cmd = [spark_submit_path()]
    if master:
        cmd += ["--master", master]
    cmd += ["--jars", ",".join(find_spark_jars()), "--py-files", build_py_files()]
    effective = master or default_master(conf)
    local = effective is not None and is_local_master(effective)
    if python is None and local:
        python = sys.executable
    settings = {**(local_conf() if local else {}), **(conf or {})}
    if python:
        settings.setdefault("spark.pyspark.python", python)
        settings.setdefault("spark.pyspark.driver.python", python)
    for key, value in settings.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += [str(RUN_SCRIPT), subcommand, "--config", str(config), *args]
    return cmd
