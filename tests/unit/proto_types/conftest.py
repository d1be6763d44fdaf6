"""Fixtures: the test .proto files compiled by protoc (with source info) into message classes."""

from __future__ import annotations

import pytest

from tests.support.proto_types_testkit import Protos, compile_protos


@pytest.fixture(scope="session")
def protos(tmp_path_factory: pytest.TempPathFactory) -> Protos:
    fds = compile_protos(tmp_path_factory.mktemp("protos"), "types3.proto", "types2.proto")
    return Protos(fds)
