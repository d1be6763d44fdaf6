"""Fixtures of the bronze integration tests: a producer that remembers what the real broker of
infra/stack.sh acknowledged (helpers: tests/support/bronze_itkit.py). Kafka and Spark come
from tests/conftest.py."""

from __future__ import annotations

import pytest

from tests.support.bronze_itkit import Kafka


@pytest.fixture
def kafka(bootstrap: str) -> Kafka:
    return Kafka(bootstrap)
