"""Fixtures of the silver integration tests: a registry test server this folder owns, on a
fixed port with its schemas in a JSON file, so a test can take it down and bring it back
(helpers: tests/support/silver_itkit.py). Kafka and Spark come from tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.silver_itkit import Registry


@pytest.fixture(scope="session")
def registry(tmp_path_factory: Any) -> Iterator[Registry]:
    reg = Registry(tmp_path_factory.mktemp("registry") / "registry.json")
    yield reg
    reg.stop()
