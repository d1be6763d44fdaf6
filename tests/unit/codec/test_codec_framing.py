"""Framing: prefix forms (magic 0 and 1), header form, message indexes, every malformation."""

from __future__ import annotations

import uuid

import pytest

from codec.errors import BadIndexes, BadMagic, EmptyValue, Truncated
from codec.framing import (
    KEY_SCHEMA_ID_HEADER,
    VALUE_SCHEMA_ID_HEADER,
    parse_frame,
    read_message_indexes,
    write_frame,
    write_message_indexes,
)

GUID = "0f8fad5b-d9cb-469f-a165-70867728950e"
GUID_BYTES = uuid.UUID(GUID).bytes
PAYLOAD = b"\x08\x96\x01"  # field 1 = 150


def test_magic0_single_zero_index():
    frame = parse_frame(b"\x00\x00\x00\x00\x2a\x00" + PAYLOAD)
    assert frame.magic == 0
    assert frame.schema_id == 42
    assert frame.schema_guid is None
    assert frame.message_indexes == (0,)
    assert frame.payload_offset == 6
    assert frame.source == "prefix"
    assert frame.schema_key == 42


def test_schema_id_is_unsigned_big_endian():
    frame = parse_frame(b"\x00\xff\xff\xff\xfe\x00")
    assert frame.schema_id == 0xFFFFFFFE


def test_reference_readme_vectors():
    # The corrected worked example: schema 320, indexes [2, 0, 1].
    value = bytes.fromhex("00 00000140 06 04 00 02".replace(" ", "")) + PAYLOAD
    frame = parse_frame(value)
    assert (frame.schema_id, frame.message_indexes, frame.payload_offset) == (320, (2, 0, 1), 9)
    # The serdes page's [1, 0] is written 04 02 00.
    assert read_message_indexes(bytes.fromhex("040200"), 0) == ((1, 0), 3)


def test_long_form_of_first_message():
    frame = parse_frame(b"\x00\x00\x00\x00\x01\x02\x00" + PAYLOAD)
    assert frame.message_indexes == (0,)
    assert frame.payload_offset == 7


def test_magic1_guid_prefix():
    value = b"\x01" + GUID_BYTES + b"\x02\x04" + PAYLOAD
    frame = parse_frame(value)
    assert frame.magic == 1
    assert frame.schema_id is None
    assert frame.schema_guid == GUID
    assert frame.message_indexes == (2,)
    assert frame.payload_offset == 19
    assert frame.schema_key == GUID


def test_header_form_guid_value_is_bare_payload():
    headers = [("other", b"x"), (VALUE_SCHEMA_ID_HEADER, b"\x01" + GUID_BYTES + b"\x00")]
    frame = parse_frame(PAYLOAD, headers)
    assert (frame.source, frame.schema_guid, frame.message_indexes, frame.payload_offset) == (
        "header",
        GUID,
        (0,),
        0,
    )


def test_header_form_accepts_magic0_and_bytes_keys():
    headers = [(VALUE_SCHEMA_ID_HEADER.encode(), b"\x00\x00\x00\x00\x07\x04\x02\x00")]
    frame = parse_frame(PAYLOAD, headers)
    assert (frame.schema_id, frame.message_indexes, frame.source) == (7, (1, 0), "header")


def test_last_header_wins():
    first = b"\x00\x00\x00\x00\x01\x00"
    last = b"\x00\x00\x00\x00\x02\x00"
    frame = parse_frame(PAYLOAD, [(VALUE_SCHEMA_ID_HEADER, first), (VALUE_SCHEMA_ID_HEADER, last)])
    assert frame.schema_id == 2


def test_null_header_means_read_the_prefix():
    value = b"\x00\x00\x00\x00\x05\x00" + PAYLOAD
    frame = parse_frame(value, [(VALUE_SCHEMA_ID_HEADER, None)])
    assert (frame.source, frame.schema_id, frame.payload_offset) == ("prefix", 5, 6)
    # ... also when a non-null one came before it: the last one is the null one.
    frame = parse_frame(
        value,
        [(VALUE_SCHEMA_ID_HEADER, b"\x00\x00\x00\x00\x09\x00"), (VALUE_SCHEMA_ID_HEADER, None)],
    )
    assert frame.source == "prefix"


def test_key_header_only_for_keys():
    headers = {KEY_SCHEMA_ID_HEADER: b"\x00\x00\x00\x00\x03\x00"}
    assert parse_frame(PAYLOAD, headers, is_key=True).schema_id == 3
    # For the value, the key header is irrelevant: the value's own prefix is read.
    with pytest.raises(BadMagic):
        parse_frame(PAYLOAD, headers)


@pytest.mark.parametrize("value", [None, b"", bytearray(), memoryview(b"")])
def test_empty_value(value):
    with pytest.raises(EmptyValue) as info:
        parse_frame(value)
    assert info.value.code == "EMPTY_VALUE"
    assert info.value.stage == "framing"
    assert info.value.record_fault is True


def test_empty_value_with_a_schema_header_is_an_all_default_message():
    header = [(VALUE_SCHEMA_ID_HEADER, b"\x01" + GUID_BYTES + b"\x00")]
    frame = parse_frame(b"", header)
    assert (frame.source, frame.payload_offset, frame.schema_guid) == ("header", 0, GUID)
    with pytest.raises(EmptyValue, match="tombstone"):
        parse_frame(None, header)
    with pytest.raises(EmptyValue):  # a null header means the prefix form: empty again
        parse_frame(b"", [(VALUE_SCHEMA_ID_HEADER, None)])


@pytest.mark.parametrize("magic", [2, 0x7F, 0xFF, ord("{")])
def test_bad_magic(magic):
    with pytest.raises(BadMagic, match=f"0x{magic:02x}") as info:
        parse_frame(bytes([magic]) + b"\x00" * 10)
    assert info.value.offset == 0


@pytest.mark.parametrize(
    ("value", "offset"),
    [
        (b"\x00", 1),
        (b"\x00\x00\x00\x01", 4),
        (b"\x00\x00\x00\x00\x01", 5),  # no index byte at all
        (b"\x01" + GUID_BYTES[:15], 16),
        (b"\x01" + GUID_BYTES, 17),
        (b"\x00\x00\x00\x00\x01\x04\x02", 7),  # count 2, one index present
        (b"\x00\x00\x00\x00\x01\x02\x80", 6),  # index varint cut short
    ],
)
def test_truncated(value, offset):
    with pytest.raises(Truncated) as info:
        parse_frame(value)
    assert info.value.offset == offset
    assert info.value.code == "TRUNCATED"


PREFIX = b"\x00\x00\x00\x00\x01"


@pytest.mark.parametrize(
    ("indexes_hex", "message"),
    [
        ("01", "negative message index count"),  # zigzag 1 is -1
        ("ca01", "exceeds 100"),  # count 101
        ("0201", "out of range"),  # count 1, index -1
        ("028080808010", "out of range"),  # count 1, index 2**31
        ("02" + "80" * 10 + "01", "longer than 10 bytes"),
    ],
)
def test_bad_indexes(indexes_hex, message):
    value = PREFIX + bytes.fromhex(indexes_hex) + b"\x00" * 300
    with pytest.raises(BadIndexes, match=message) as info:
        parse_frame(value)
    assert info.value.code == "BAD_INDEXES"
    assert info.value.offset is not None and info.value.offset >= 5


def test_index_limits_accepted():
    # 100 indexes is the deepest path accepted; 2**31 - 1 the largest index (a Java int).
    assert parse_frame(PREFIX + b"\xc8\x01" + b"\x00" * 100).message_indexes == (0,) * 100
    assert parse_frame(PREFIX + bytes.fromhex("02feffffff0f")).message_indexes == (2**31 - 1,)


def test_header_with_trailing_bytes_is_bad_indexes():
    with pytest.raises(BadIndexes, match="after the message indexes"):
        parse_frame(PAYLOAD, [(VALUE_SCHEMA_ID_HEADER, b"\x00\x00\x00\x00\x01\x00\x00")])


def test_empty_or_bad_header_value():
    with pytest.raises(Truncated):
        parse_frame(PAYLOAD, [(VALUE_SCHEMA_ID_HEADER, b"")])
    with pytest.raises(BadMagic, match="schema header"):
        parse_frame(PAYLOAD, [(VALUE_SCHEMA_ID_HEADER, b"\x07")])


@pytest.mark.parametrize("indexes", [[0], [1], [2, 0, 1], [0, 0], [5, 63, 64, 1000]])
def test_write_then_parse(indexes):
    for schema in (320, GUID):
        value = write_frame(schema, indexes, PAYLOAD)
        frame = parse_frame(bytearray(value))
        assert frame.message_indexes == tuple(indexes)
        assert value[frame.payload_offset :] == PAYLOAD


def test_writer_uses_confluent_short_form():
    assert write_message_indexes([0]) == b"\x00"
    assert write_message_indexes([1, 0]) == bytes.fromhex("040200")
    assert write_message_indexes([2, 0, 1]) == bytes.fromhex("06040002")
