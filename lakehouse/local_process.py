"""Whether a process named in a record (a writer lease's holder) ran on this machine and has
ended.

A record names its process by :func:`this_process`: the host name, the kernel's boot id and
the pid namespace, the pid and the parent's pid. :func:`ended_here` answers True only when
the first three are this process's (the same machine since the same boot, pids of the same
namespace: two containers with one host name have namespaces of their own) and neither pid is
in use. The parent counts because under spark-submit it is the JVM, which may still be
finishing a commit the Python driver began; a parent that lives on (a shell, a scheduler)
leaves the record to expire.
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
    return {**_machine(), "pid": os.getpid(), "parent_pid": os.getppid()}


def ended_here(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` names a process of this machine, boot and pid namespace that has
    ended (see the module docstring)."""
    machine = _machine()
    if not machine["boot_id"] or any(record.get(k) != v for k, v in machine.items()):
        return False
    pids = [record.get("pid"), record.get("parent_pid")]
    numbers = [p for p in pids if isinstance(p, int) and not isinstance(p, bool) and p > 1]
    if len(numbers) != len(pids) or os.getpid() in numbers:
        return False
    return not any(_alive(p) for p in numbers)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True
