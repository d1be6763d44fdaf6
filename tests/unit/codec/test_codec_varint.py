"""Varint readers and writers: Kafka ByteUtils vectors, limits, hard bounds."""

from __future__ import annotations

import pytest
from google.protobuf.internal.encoder import _VarintBytes

from codec.errors import BadIndexes, Truncated
from codec.varint import (
    read_uvarint32,
    read_uvarint64,
    read_varint32,
    read_varint64,
    write_uvarint32,
    write_uvarint64,
    write_varint32,
    write_varint64,
)

# Unsigned varints, derived by hand from the spec (7 bits a byte, low group first) for the
# values Kafka's ByteUtilsTest uses.
UNSIGNED = [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "8001"),
    (129, "8101"),
    (256, "8002"),
    (1024, "8008"),
    (100500, "949106"),
    (9999999, "fface204"),
    (2**31 - 1, "ffffffff07"),
    (2**32 - 1, "ffffffff0f"),
]

# Zigzag (Kafka's writeVarint / writeVarlong).
SIGNED32 = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
]
SIGNED64 = [
    *SIGNED32,
    (2**63 - 1, "feffffffffffffffff01"),
    (-(2**63), "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "hex_bytes"), UNSIGNED)
def test_unsigned_vectors(value, hex_bytes):
    raw = bytes.fromhex(hex_bytes)
    assert write_uvarint32(value) == raw
    assert write_uvarint64(value) == raw
    assert raw == _VarintBytes(value)  # protobuf's own encoder agrees
    assert read_uvarint32(raw) == (value, len(raw))
    assert read_uvarint64(b"\xaa" + raw + b"\xbb", 1) == (value, 1 + len(raw))


@pytest.mark.parametrize(("value", "hex_bytes"), SIGNED32)
def test_zigzag32_vectors(value, hex_bytes):
    raw = bytes.fromhex(hex_bytes)
    assert write_varint32(value) == raw
    assert read_varint32(raw) == (value, len(raw))


@pytest.mark.parametrize(("value", "hex_bytes"), SIGNED64)
def test_zigzag64_vectors(value, hex_bytes):
    raw = bytes.fromhex(hex_bytes)
    assert write_varint64(value) == raw
    assert read_varint64(memoryview(raw)) == (value, len(raw))


def test_uint64_limit():
    raw = write_uvarint64(2**64 - 1)
    assert raw == bytes.fromhex("ffffffffffffffffff01")
    assert read_uvarint64(raw) == (2**64 - 1, 10)


@pytest.mark.parametrize(
    "raw",
    [
        "8080808010",  # 5 bytes but 2**32: does not fit 32 bits
        "ffffffffff01",  # 6 bytes
    ],
)
def test_uvarint32_bounds(raw):
    with pytest.raises(BadIndexes) as info:
        read_uvarint32(bytes.fromhex(raw))
    assert info.value.offset == 0


def test_uvarint64_longer_than_ten_bytes_is_bad_indexes():
    raw = b"\x80" * 10 + b"\x01"
    with pytest.raises(BadIndexes, match="longer than 10 bytes"):
        read_uvarint64(raw)
    with pytest.raises(BadIndexes, match="does not fit in 64 bits"):
        read_uvarint64(b"\xff" * 9 + b"\x02")
    # An endless run of continuation bytes stops at the bound, not at the end of input.
    with pytest.raises(BadIndexes):
        read_varint64(b"\xff" * 10_000)


@pytest.mark.parametrize("reader", [read_uvarint32, read_uvarint64, read_varint32, read_varint64])
def test_truncated(reader):
    with pytest.raises(Truncated) as info:
        reader(b"\x01\x80\x80", 1)
    assert info.value.offset == 1
    with pytest.raises(Truncated):
        reader(b"", 0)
    with pytest.raises(Truncated):
        reader(b"\x05", 1)


@pytest.mark.parametrize(
    ("writer", "value"),
    [
        (write_uvarint32, -1),
        (write_uvarint32, 2**32),
        (write_uvarint64, 2**64),
        (write_varint32, 2**31),
        (write_varint64, -(2**63) - 1),
    ],
)
def test_writers_reject_out_of_range(writer, value):
    with pytest.raises(ValueError):
        writer(value)
