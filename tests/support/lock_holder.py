"""A checkpoint lock held by another process (``lakehouse.checkpoint_guard`` locks with
``flock``, so only another process is refused it), for tests of what a job does when one of
its checkpoints is taken."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOLDER = """
import sys
from lakehouse.checkpoint_guard import guard_checkpoint
guard_checkpoint(sys.argv[1])
print("held", flush=True)
sys.stdin.read()  # until the test closes it, or kills this process
"""


def hold_in_another_process(checkpoint: Path) -> subprocess.Popen[str]:
    """A process that holds ``checkpoint``'s lock until its stdin is closed (or it is killed)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(checkpoint)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def guard_in_another_process(checkpoint: Path) -> subprocess.CompletedProcess[str]:
    """Guard ``checkpoint`` from a new process that then exits (return code 0: it was free)."""
    code = (
        "import sys; from lakehouse.checkpoint_guard import guard_checkpoint as g; g(sys.argv[1])"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(checkpoint)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
