"""``--cpu-report`` (tests/support/cpu_report.py) on a small suite run in a fresh pytest, with
two xdist processes (``make test`` runs three): a test whose subprocess burns CPU is charged that
subprocess's own CPU time, whether the test waited for it, left it running (idle), or started
it through a process that ended without waiting for it; a test that only sleeps uses next to
none."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Each burner writes the CPU seconds it used (its own count) to a file named after its test.
BURN = (
    "import resource, sys, time\n"
    "sum(i * i for i in range(3_000_000))\n"
    "u = resource.getrusage(resource.RUSAGE_SELF)\n"
    "open(sys.argv[1], 'w').write(str(u.ru_utime + u.ru_stime))\n"
    # then waits for its stdin to close, or lingers a while
    "time.sleep(3.5) if sys.argv[2:] == ['linger'] else sys.stdin.read()\n"
)
# A process that starts a burner and ends when it has burnt, without waiting for it: the
# burner's CPU time never reaches the test process's count of waited-for children (as a
# Spark job's JVM, whose launcher, PySpark, does not wait for it).
ORPHAN = (
    "import os, subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2], 'linger'])\n"
    "while not (os.path.exists(sys.argv[2]) and open(sys.argv[2]).read()):\n"
    "    time.sleep(0.05)\n"
    "time.sleep(3.0)\n"  # the report reads processes every 0.5 s (a loaded machine: later)
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
    proc = burner("waited")
    time.sleep(3.0)  # the report reads processes every 0.5 s: let it see this one's total
    finish(proc)

def test_burns_cpu_in_a_subprocess_of_a_subprocess_it_does_not_wait_for():
    subprocess.run([sys.executable, "-c", {ORPHAN!r}, BURN, "orphan"], check=True)

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
    assert "most CPU time, 4 of 4 tests" in out, out[-3000:]
    rows = re.findall(r"^\s*([\d.]+)s cpu  (\S+)$", out, re.MULTILINE)
    cpu = {name.split("::")[1]: float(seconds) for seconds, name in rows}
    assert list(cpu)[-1] == "test_sleeps" and cpu["test_sleeps"] < 0.1, out[-3000:]
    # each burner's test counts the burner's own CPU time, and little more (the test process)
    for test, burner in (
        ("test_burns_cpu_in_a_subprocess_it_waits_for", "waited"),
        ("test_burns_cpu_in_a_subprocess_alive_at_its_end", "alive"),
        ("test_burns_cpu_in_a_subprocess_of_a_subprocess_it_does_not_wait_for", "orphan"),
    ):
        own = float((tmp_path / burner).read_text())
        assert own - 0.1 < cpu[test] < own + 0.25, (test, own, out[-3000:])
    total = re.search(r"^\s*([\d.]+)s cpu  all tests together$", out, re.MULTILINE)
    assert total and abs(float(total.group(1)) - sum(cpu.values())) < 0.03, out[-3000:]
