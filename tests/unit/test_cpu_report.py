"""``--cpu-report`` (tests/support/cpu_report.py) on a small suite run in a fresh pytest, with
two xdist processes as ``make test`` runs: a test whose subprocess burns CPU is charged that
subprocess's own CPU time, whether the test waited for it or left it running (idle); a test
that only sleeps uses next to none."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Each burner writes the CPU seconds it used (its own count) to a file named after its test.
BURN = (
    "import resource, sys\n"
    "sum(i * i for i in range(3_000_000))\n"
    "u = resource.getrusage(resource.RUSAGE_SELF)\n"
    "open(sys.argv[1], 'w').write(str(u.ru_utime + u.ru_stime))\n"
    "sys.stdin.read()\n"  # then waits for its stdin to close
)

SMALL_SUITE = f"""
import subprocess, sys, time

BURN = {BURN!r}

def burner(name):
    proc = subprocess.Popen([sys.executable, "-c", BURN, name], stdin=subprocess.PIPE)
    while True:  # burnt when the file is written
        try:
            if open(name).read():
                return proc
        except OSError:
            pass
        time.sleep(0.05)

def finish(proc):
    proc.stdin.close()
    proc.wait()

def test_burns_cpu_in_a_subprocess_it_waits_for():
    finish(burner("waited"))

LEFT_RUNNING = []  # idle until the test process ends and closes their stdin

def test_burns_cpu_in_a_subprocess_alive_at_its_end():
    LEFT_RUNNING.append(burner("alive"))

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
    assert "most CPU time, 3 of 3 tests" in out, out[-3000:]
    rows = re.findall(r"^\s*([\d.]+)s cpu  (\S+)$", out, re.MULTILINE)
    cpu = {name.split("::")[1]: float(seconds) for seconds, name in rows}
    assert list(cpu)[-1] == "test_sleeps" and cpu["test_sleeps"] < 0.1, out[-3000:]
    # each burner's test counts the burner's own CPU time, and little more (the test process)
    for test, burner in (
        ("test_burns_cpu_in_a_subprocess_it_waits_for", "waited"),
        ("test_burns_cpu_in_a_subprocess_alive_at_its_end", "alive"),
    ):
        own = float((tmp_path / burner).read_text())
        assert own - 0.05 < cpu[test] < own + 0.25, (test, own, out[-3000:])
    total = re.search(r"^\s*([\d.]+)s cpu  all tests together$", out, re.MULTILINE)
    assert total and abs(float(total.group(1)) - sum(cpu.values())) < 0.15, out[-3000:]
