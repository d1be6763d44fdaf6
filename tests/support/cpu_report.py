"""``--cpu-report N``: the N tests that used the most CPU time, after the run.

The suite is CPU-bound on two cores: what a test costs the run is the CPU its processes use
(the test process and every process it started: Spark JVMs, jobs run as subprocesses,
``spark-submit``, Airflow), while its duration also holds its waiting and the other test
process's load. A test's CPU time is what the test process and its descendants used from
the start of its setup to the end of its teardown: the test process's resource usage with
the children it waited for, plus the CPU time of its live descendants (the session's Spark
JVM), read from ``/proc`` (psutil). So a module or session fixture counts in the test that
sets it up and in the one whose teardown ends it, and a process a test leaves running counts
in the tests that run while it works. Processes that are not descendants of the test
process (the stack's services) are not counted.

Loaded with ``-p tests.support.cpu_report`` (``infra/run_tests.sh`` does); with pytest-xdist
each test process measures its own tests and the figures reach the report through each
test's ``user_properties``.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

PROPERTY = "cpu_seconds"
_STARTED = pytest.StashKey[float]()
_measured: dict[str, float] = {}


def cpu_seconds_of_this_process_tree() -> float:
    """CPU seconds used so far by this process, its waited-for children and its live
    descendants (processes that end between two readings count once their parent waits)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    try:
        descendants = psutil.Process().children(recursive=True)
    except psutil.Error:
        return total
    for process in descendants:
        try:
            t = process.cpu_times()
        except psutil.Error:  # ended since it was listed
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-report",
        type=int,
        default=0,
        metavar="N",
        help="list the N tests that used the most CPU time (with their processes')",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.config.getoption("cpu_report"):
        item.stash[_STARTED] = cpu_seconds_of_this_process_tree()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    if call.when == "teardown" and _STARTED in item.stash:
        used = cpu_seconds_of_this_process_tree() - item.stash[_STARTED]
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
        terminalreporter.write_line(f"{seconds:8.1f}s cpu  {nodeid}")
    terminalreporter.write_line(f"{total:8.1f}s cpu  all tests together")
