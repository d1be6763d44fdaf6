"""Running a command to its end in a session of its own, so a timeout stops all it started."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from typing import Any


def run_in_own_session(
    args: Sequence[str], *, timeout: float, **popen: Any
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` (text mode; ``popen``: more ``subprocess.Popen`` arguments) and wait for it.

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout`` seconds; its whole session
            (a JVM, Maven or Go it started too) was killed first.
    """
    proc = subprocess.Popen(list(args), text=True, start_new_session=True, **popen)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
