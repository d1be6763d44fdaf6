"""Test distribution over pytest-xdist workers (``infra/run_tests.sh`` runs ``-n`` workers).

Each test folder (``integration/dags``, ``unit/codec`` ...) is one xdist group: its tests run
on one worker, one after the other, so the folder's session fixtures (a Spark session, a demo
lakehouse, an Airflow home) are built once, as in a serial run. Folders run side by side; they
share the local stack, which every test already uses under its own topic and subject names.

The folders that take longest run first, so that no worker is left with a long one at the
end (the order of the rest is pytest's own).
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# Longest first (seconds in a serial run of the whole suite, CI-like machine, 2026-11-25).
SLOW_FIRST = (
    "integration/silver",  # ~700
    "integration/dags",  # ~620
    "integration/ops",  # ~380
    "integration/demo",  # ~300
    "integration/bronze",  # ~200
    "unit/silver",
    "integration/quality",
    "unit/dags",
    "unit/codec",
)


def _group(item: pytest.Item) -> str:
    parts = Path(str(item.path)).resolve().relative_to(TESTS).parts
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
    # stable: within a folder, and among the other folders, pytest's order stays
    items.sort(key=lambda item: rank.get(_group(item), len(SLOW_FIRST)))
