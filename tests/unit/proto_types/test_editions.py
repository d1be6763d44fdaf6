"""Edition 2023: presence follows the field_presence feature (explicit by default)."""

from __future__ import annotations

import pytest

from pipelines.proto_types import RowConverter
from tests.support.proto_types_testkit import Protos, compile_protos


@pytest.fixture(scope="module")
def feature(tmp_path_factory):
    protos = Protos(compile_protos(tmp_path_factory.mktemp("editions"), "editions.proto"))
    return protos.cls("protolake.test.ed.Feature")


def test_explicit_presence_is_the_default_and_implicit_is_opt_in(feature):
    conv = RowConverter(feature.DESCRIPTOR)
    assert conv.to_dict(feature()) == {
        "explicit_count": None,
        "implicit_count": 0,
        "note": None,
        "mood": None,
        "packed": [],
    }
    zeros = feature(explicit_count=0, implicit_count=0, note="", mood=0, packed=[1])
    assert conv.to_dict(feature.FromString(zeros.SerializeToString())) == {
        "explicit_count": 0,
        "implicit_count": 0,
        "note": "",
        "mood": "MOOD_UNSPECIFIED",
        "packed": [1],
    }


def test_open_enum_by_default_keeps_unknown_numbers(feature):
    message = feature.FromString(bytes([0x20, 17]))  # field 4 (mood), varint 17
    assert RowConverter(feature.DESCRIPTOR).to_dict(message)["mood"] == "17"
