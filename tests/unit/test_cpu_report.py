"""``--cpu-report`` (tests/support/cpu_report.py) on a small suite run in a fresh pytest, with
two xdist processes as ``make test`` runs: a test whose subprocess burns CPU comes first with
that CPU time, a test that only sleeps uses next to none."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SMALL_SUITE = """
import subprocess, sys, time

def test_burns_cpu_in_a_subprocess():
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(4_000_000))"], check=True)

def test_sleeps():
    time.sleep(1.0)
"""


def test_the_report_ranks_tests_by_the_cpu_of_their_processes(tmp_path: Path) -> None:
    (tmp_path / "test_small.py").write_text(SMALL_SUITE)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        + ["-p", "tests.support.cpu_report", "--cpu-report", "5", "-n", "2", "test_small.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "most CPU time, 2 of 2 tests" in out, out[-3000:]
    rows = re.findall(r"^\s*([\d.]+)s cpu  (\S+)$", out, re.MULTILINE)
    assert [name for _, name in rows] == [
        "test_small.py::test_burns_cpu_in_a_subprocess",
        "test_small.py::test_sleeps",
    ], out[-3000:]
    burns, sleeps = (float(seconds) for seconds, _ in rows)
    assert burns > 0.2 and sleeps < 0.1
    total = re.search(r"^\s*([\d.]+)s cpu  all tests together$", out, re.MULTILINE)
    assert total and abs(float(total.group(1)) - (burns + sleeps)) < 0.15, out[-3000:]
