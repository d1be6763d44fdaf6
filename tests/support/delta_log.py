"""A local Delta table's commits as its log wrote them, for tests that check what a commit
recorded (its ``commitInfo``, ``txn``, ``add`` actions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _commits(table: Path) -> list[list[dict[str, Any]]]:
    """Per commit, oldest first: its actions as its log file lists them."""
    return [
        [json.loads(line) for line in file.read_text().splitlines() if line]
        for file in sorted((table / "_delta_log").glob("*.json"))
    ]


def commit_actions(table: Path) -> list[dict[str, Any]]:
    """Per commit, oldest first: its actions by kind (the last one of each kind)."""
    return [{kind: a[kind] for a in actions for kind in a} for actions in _commits(table)]


def files_added(table: Path) -> list[int]:
    """Per commit that added data files, oldest first: how many it added."""
    counts = [sum("add" in a for a in actions) for actions in _commits(table)]
    return [n for n in counts if n]
