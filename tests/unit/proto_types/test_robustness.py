"""Whatever protobuf accepts converts to a row or fails with RowConversionError, nothing else."""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.proto_types import RowConversionError, RowConverter

TYPES = [
    "protolake.test.v2.Legacy",
    "protolake.test.v3.WellKnown",
    "protolake.test.v3.TreeNode",
    "protolake.test.v3.Maps",
    "protolake.test.v3.Choice",
    "protolake.test.v3.Repeated",
]


def _tag(number: int, wire_type: int) -> bytes:
    value = number << 3 | wire_type
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Fields of plausible numbers and wire types, so that parsing often succeeds and reaches
# odd corners: invalid timestamps, unknown enum numbers, non-UTF-8 proto2 strings, odd Anys.
_varint = st.integers(0, 2**64 - 1).map(
    lambda v: bytes(
        [
            (v >> (7 * i)) & 0x7F | (0x80 if v >> (7 * (i + 1)) else 0)
            for i in range(10)
            if i == 0 or v >> (7 * i)
        ]
    )
)
_field = st.one_of(
    st.tuples(st.integers(1, 23), _varint).map(lambda t: _tag(t[0], 0) + t[1]),
    st.tuples(st.integers(1, 23), st.binary(max_size=12)).map(
        lambda t: _tag(t[0], 2) + bytes([len(t[1])]) + t[1]
    ),
    st.tuples(st.integers(1, 23), st.binary(min_size=8, max_size=8)).map(
        lambda t: _tag(t[0], 1) + t[1]
    ),
    st.tuples(st.integers(1, 23), st.binary(min_size=4, max_size=4)).map(
        lambda t: _tag(t[0], 5) + t[1]
    ),
)
payloads = st.lists(_field, max_size=12).map(b"".join)


@pytest.mark.parametrize("name", TYPES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=payloads)
def test_parsed_payloads_convert_or_raise_row_conversion_error(protos, name, payload):
    cls = protos.cls(name)
    conv = RowConverter(cls.DESCRIPTOR, max_depth=2)
    try:
        message = cls.FromString(payload)
    except DecodeError:
        return
    try:
        batch = conv.to_record_batch([message, cls()])
    except RowConversionError as exc:
        assert exc.index == 0
        assert exc.column in conv.column_names
        return
    assert batch.num_rows == 2
    assert batch.schema == conv.arrow_schema
