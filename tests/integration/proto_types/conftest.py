"""Fixtures: the compiled test protos (Spark comes from tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.support.proto_types_testkit import Protos, compile_protos


@pytest.fixture(scope="session")
def protos(tmp_path_factory: pytest.TempPathFactory) -> Protos:
    return Protos(compile_protos(tmp_path_factory.mktemp("protos"), "types3.proto"))
