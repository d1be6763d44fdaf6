"""A silver table whose registration the metastore's outage deferred is registered by a later
batch, even when that batch brings nothing new (``SilverRegistration``)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from lakehouse.catalog import CatalogDatabases
from pipelines.silver import registration


def test_a_deferred_registration_is_tried_again_by_the_next_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = [None, "silver.t"]  # the metastore is down, then back
    calls: list[str] = []

    def register_or_defer(_spark: Any, database: str, path: str, **_kw: Any) -> str | None:
        calls.append(path)
        return answers.pop(0)

    monkeypatch.setattr(registration, "register_or_defer", register_or_defer)
    monkeypatch.setattr(registration, "registered_sources", lambda _s, _p: ((), ()))
    monkeypatch.setattr(registration, "describe_silver_table", lambda *_a: ("", {}))
    databases = CatalogDatabases(bronze="", silver="silver", quarantine="", quality="")
    silver = registration.SilverRegistration(None, databases, threading.RLock())  # type: ignore[arg-type]
    plan = SimpleNamespace(
        table="t", path="/lh/silver/t", message_type="m", versions=[SimpleNamespace(version="id:1")]
    )
    for _ in range(3):  # three batches of the same version and topic
        silver.silver_table(plan, ["orders"])  # type: ignore[arg-type]
    assert calls == ["/lh/silver/t", "/lh/silver/t"]  # deferred, registered, then known
