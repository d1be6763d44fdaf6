"""Fixtures of the ops integration tests: ONE lakehouse really written by bronze and silver
from two topics of a small demo stream (orders, customers) plus two extra topics, with an
in-process registry test server (helpers: tests/support/ops_itkit.py):

- ``<prefix>late``: records framed with a schema id the registry does not have yet (silver
  quarantines them as UNKNOWN_SCHEMA; a test registers the schema and replays them);
- ``<prefix>tx``: a transactional topic with a committed, an aborted and a committed
  transaction (offset gaps that are markers and aborted records, not losses).

Kafka not answering fails the tests (run ``infra/stack.sh up``): they never skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.ops_itkit import Lakehouse, build_lakehouse


@pytest.fixture(scope="session")
def lake(spark: Any, bootstrap: str, tmp_path_factory: Any) -> Iterator[Lakehouse]:
    lh = build_lakehouse(spark, tmp_path_factory.mktemp("ops"))
    yield lh
    lh.close()
