"""``--cpu-report N``: the N tests that used the most CPU time, after the run.

The suite is CPU-bound on two cores: what a test costs the run is the CPU its processes use
(the test process and every process it started: Spark JVMs, jobs run as subprocesses,
``spark-submit``, Airflow), while its duration also holds its waiting and the other test
process's load. A test's CPU time is what the test process and its descendants used from
the start of its setup to the end of its teardown.

How: a thread of the test process reads the CPU time of each of its descendants from
``/proc`` (psutil) every :data:`POLL_SECONDS` and keeps the last figure of every process it
saw, including those that ended since; a test is charged the growth of those figures over
its window (read once more at each end) and the test process's own. Polling rather than the
resource usage of waited-for children: the JVM of a job run as ``python -m pipelines...``
is a grandchild whose parent (PySpark's launcher) does not wait for it, so its CPU time never
reaches the test process's count.
So a module or session fixture counts in the test that sets it up and in the one whose
teardown ends it, a process a test leaves running counts in the tests that run while it
works, a process that lives less than :data:`POLL_SECONDS` may not count, nor the last
moments of one that ends between two readings. Processes that are not descendants of the
test process (the stack's services) are not counted.

Loaded with ``-p tests.support.cpu_report`` (``infra/run_tests.sh`` does); with pytest-xdist
each test process measures its own tests and the figures reach the report through each
test's ``user_properties``.
"""

from __future__ import annotations

import resource
import threading
from typing import Any

import psutil
import pytest

PROPERTY = "cpu_seconds"
POLL_SECONDS = 0.5
_STARTED = pytest.StashKey[float]()
_measured: dict[str, float] = {}


class DescendantsCpu:
    """The last CPU time read of every descendant process seen, by (pid, start time)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, float], float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="cpu-report", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def total(self) -> float:
        """CPU seconds of this process and of every descendant seen so far, read now."""
        self.read()
        own = resource.getrusage(resource.RUSAGE_SELF)
        with self._lock:
            return own.ru_utime + own.ru_stime + sum(self._seen.values())

    def read(self) -> None:
        try:
            descendants = psutil.Process().children(recursive=True)
        except psutil.Error:
            return
        for process in descendants:
            try:
                with process.oneshot():
                    key = (process.pid, process.create_time())
                    t = process.cpu_times()
            except psutil.Error:  # ended since it was listed
                continue
            with self._lock:
                self._seen[key] = max(self._seen.get(key, 0.0), t.user + t.system)

    def _poll(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self.read()


_cpu: DescendantsCpu | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-report",
        type=int,
        default=0,
        metavar="N",
        help="list the N tests that used the most CPU time (with their processes')",
    )


def pytest_configure(config: pytest.Config) -> None:
    global _cpu
    # with pytest-xdist, the test processes measure; the one that hands out tests does not
    distributing = getattr(config.option, "dist", "no") != "no" or bool(
        getattr(config.option, "numprocesses", None)
    )
    controller = distributing and not hasattr(config, "workerinput")
    if config.getoption("cpu_report") and not controller:
        _cpu = DescendantsCpu()
        _cpu.start()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _cpu is not None:
        _cpu.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if _cpu is not None:
        item.stash[_STARTED] = _cpu.total()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    outcome = yield
    if call.when == "teardown" and _cpu is not None and _STARTED in item.stash:
        used = _cpu.total() - item.stash[_STARTED]
        outcome.get_result().user_properties.append((PROPERTY, used))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == PROPERTY and report.when == "teardown":
            _measured[report.nodeid] = float(value)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    count = config.getoption("cpu_report")
    if not count or not _measured:
        return
    total = sum(_measured.values())
    heaviest = sorted(_measured.items(), key=lambda kv: -kv[1])[:count]
    terminalreporter.write_sep("=", f"most CPU time, {len(heaviest)} of {len(_measured)} tests")
    for nodeid, seconds in heaviest:
        terminalreporter.write_line(f"{seconds:9.2f}s cpu  {nodeid}")
    terminalreporter.write_line(f"{total:9.2f}s cpu  all tests together")
