"""Whether a process named in a record (a writer lease's holder) ran on this machine and has
ended.

A record names its process by :func:`this_process`: the host name, the kernel's boot id and
the pid namespace, and the pid. :func:`ended_here` answers True only when all of the first
three are this process's (the same machine since the same boot, pids of the same namespace:
two containers with one host name have namespaces of their own) and no process has that pid.
Anything else (another machine, a record without these fields, a pid in use, whoever uses it)
is False: the caller waits for the record's expiry as before.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any


@cache
def _machine() -> dict[str, str]:
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:  # no procfs: never judged
        boot = namespace = ""
    return {"host": socket.gethostname(), "boot_id": boot, "pid_namespace": namespace}


def this_process() -> dict[str, Any]:
    """This process's fields for a record (see the module docstring)."""
    return {**_machine(), "pid": os.getpid()}


def ended_here(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` names a process of this machine, boot and pid namespace that has
    ended (see the module docstring)."""
    machine = _machine()
    if not machine["boot_id"] or any(record.get(k) != v for k, v in machine.items()):
        return False
    pid = record.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False
