"""A bench run again with the JVM's optimising compiler (C2).

Local masters run their JVM with the client compiler alone (``pipelines.spark.local_conf``),
which slows JVM-heavy work such as Spark's ``from_json`` more than protolake's decode; a
cluster's JVMs run both compilers. :func:`rerun_with_optimising_jit` runs a bench script again
in a process whose Spark conf folder names the driver's JVM options, so that ``local_conf``
adds none and the optimising compiler stays on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pipelines.jobs import spark_conf_dir
from pipelines.spark import DRIVER_JVM_OPTIONS, JVM_OPTION_KEYS

#: the driver's JVM options of the run with the optimising compiler: the code cache Spark's
#: generated code needs, nothing that turns a compiler off
OPTIMISING_JVM_OPTIONS = "-XX:ReservedCodeCacheSize=240m"


def optimising_conf_dir() -> Path:
    """A new folder with the files of the Spark conf folder in use, its ``spark-defaults.conf``
    naming :data:`OPTIMISING_JVM_OPTIONS` as the driver's JVM options (the caller removes it)."""
    source = spark_conf_dir()
    folder = Path(tempfile.mkdtemp(prefix="bench-optimising-jit-"))
    lines: list[str] = []
    if source.is_dir():
        for path in source.iterdir():
            if path.is_file() and path.name != "spark-defaults.conf":
                shutil.copy(path, folder)
        defaults = source / "spark-defaults.conf"
        if defaults.is_file():
            text = defaults.read_text(encoding="utf-8", errors="replace")
            # the driver's JVM options, under either key, are replaced (a value continued on
            # the next line with a trailing backslash is not handled)
            lines = [ln for ln in text.splitlines() if not ln.strip().startswith(JVM_OPTION_KEYS)]
    lines.append(f"{DRIVER_JVM_OPTIONS} {OPTIMISING_JVM_OPTIONS}")
    (folder / "spark-defaults.conf").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def rerun_with_optimising_jit(argv: Sequence[str]) -> int:
    """Run ``python argv...`` with :func:`optimising_conf_dir` as ``SPARK_CONF_DIR``; its
    exit code."""
    folder = optimising_conf_dir()
    try:
        env = {**os.environ, "SPARK_CONF_DIR": str(folder)}
        return subprocess.call([sys.executable, *argv], env=env)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
