"""Whether a record's process ran on this machine and has ended, with real processes."""

from __future__ import annotations

import os
import subprocess
import sys

from lakehouse.local_process import ended_here, this_process


def _ended_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_process_of_this_machine_that_ended_is_known_to_have_ended() -> None:
    # with its parent (under spark-submit, the JVM that may finish a commit it began)
    record = {**this_process(), "pid": _ended_pid(), "parent_pid": _ended_pid()}
    assert ended_here(record)
    assert not ended_here({**record, "parent_pid": os.getpid()})  # a parent that lives on


def test_a_live_process_or_one_of_elsewhere_is_not() -> None:
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not ended_here({**this_process(), "pid": alive.pid, "parent_pid": _ended_pid()})
    finally:
        alive.kill()
        alive.wait()
    assert not ended_here(this_process())  # this very process
    gone = {"pid": _ended_pid(), "parent_pid": _ended_pid()}
    for field, other in (
        ("host", "another-host"),
        ("boot_id", "00000000-0000-0000-0000-000000000000"),
        ("pid_namespace", "pid:[1]"),
    ):
        assert not ended_here({**this_process(), **gone, field: other}), field
    assert not ended_here({"owner": "gone:1:x", "expires": 0})  # a record without the fields
    assert not ended_here({**this_process(), "pid": "12", "parent_pid": gone["parent_pid"]})
