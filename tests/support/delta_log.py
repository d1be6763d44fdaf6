"""A local Delta table's commits as its log wrote them, for tests that check what a commit
recorded (its ``commitInfo``, ``txn``, ``add`` actions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def commit_actions(table: Path) -> list[dict[str, Any]]:
    """Per commit, oldest first: its actions by kind (the last one of each kind)."""
    out = []
    for file in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in file.read_text().splitlines() if line]
        out.append({kind: action[kind] for action in actions for kind in action})
    return out


def files_added(table: Path) -> list[int]:
    """Per commit that added data files, oldest first: how many it added."""
    counts = []
    for file in sorted((table / "_delta_log").glob("*.json")):
        adds = sum('"add"' in line[:10] for line in file.read_text().splitlines())
        if adds:
            counts.append(adds)
    return counts
