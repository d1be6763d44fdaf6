"""Confluent Schema Registry framing of a Kafka record: which schema and message type wrote it.

Wire format (Confluent "Formats, Serializers, and Deserializers", Protobuf section):

- Prefix, magic 0: ``00 | schema id (4 bytes, big-endian, unsigned) | indexes | payload``.
- Prefix, magic 1: ``01 | schema GUID (16 bytes) | indexes | payload``.
- Header: the record header ``__value_schema_id`` (``__key_schema_id`` for keys) holds
  ``01 | GUID | indexes`` (``00 | id | indexes`` is accepted too) and the value is the bare
  payload. With several such headers the last one wins, as Kafka's ``Headers.lastHeader``
  does; a header whose value is null means "no header: read the prefix".
- Message indexes: a zigzag varint count, then that many zigzag varint indexes. A count of
  0 (the single byte ``00``) means ``[0]``, the first top-level message; the long form
  ``02 00`` (count 1, index 0) reads as ``[0]`` too. The indexes are a path: the first picks
  a top-level message of the schema file, each next one a nested message of the previous
  (see `codec.descriptors` for how nested messages are counted).

A null value is `EmptyValue`, and so is a zero-length value in the prefix form. In the header
form a zero-length value is a complete payload: the message with every field at its default,
which is what confluent-kafka's serializer writes for such a message. Anything malformed is
a `CodecError` leaf (`BadMagic`, `Truncated`, `BadIndexes`) carrying the byte offset; every
read checks the length first, so `IndexError` and `struct.error` cannot escape.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

from .errors import BadIndexes, BadMagic, EmptyValue, Truncated
from .varint import Buffer, read_varint64, write_varint32

VALUE_SCHEMA_ID_HEADER = "__value_schema_id"
KEY_SCHEMA_ID_HEADER = "__key_schema_id"

MAGIC_SCHEMA_ID = 0
MAGIC_SCHEMA_GUID = 1

#: Protobuf parsers refuse messages nested deeper than 100; no real path is longer.
MAX_MESSAGE_INDEXES = 100
#: An index is a position in a descriptor list, a Java int on the producer side.
MAX_MESSAGE_INDEX = (1 << 31) - 1

_FIRST_MESSAGE: tuple[int, ...] = (0,)
# Read only after a length check, so struct.error cannot happen.
_read_u32 = struct.Struct(">I").unpack_from
# Builds a Frame without NamedTuple's Python-level __new__: a third of the cost, per record.
_new_tuple = tuple.__new__
_COMMON_FRAMES_MAX = 4096
_common_frames: dict[bytes, Frame] = {}

HeaderValue = bytes | bytearray | memoryview | None
Headers = Iterable[tuple[str | bytes, HeaderValue]] | Mapping[str, HeaderValue]


@dataclass(frozen=True, slots=True)
class SchemaKey:
    """Which writer schema, and which message type in it, a frame names: what a batch of
    records is grouped by and resolved by (``SchemaResolver.resolve_key``).

    Attributes:
        schema_id: the schema id (magic 0), else None.
        schema_guid: the lowercase schema GUID (magic 1), else None.
        message_indexes: the message's path in the schema file, e.g. (0,) or (2, 0, 1).

    Raises:
        ValueError: not exactly one of ``schema_id`` and ``schema_guid`` is given.
    """

    schema_id: int | None
    schema_guid: str | None
    message_indexes: tuple[int, ...]

    def __post_init__(self) -> None:
        if (self.schema_id is None) == (self.schema_guid is None):
            raise ValueError("a schema key names a schema id or a schema GUID, not both nor none")

    @property
    def version(self) -> str:
        """The writer schema alone, ``id:<n>`` or ``guid:<g>`` (in messages and logs)."""
        return f"id:{self.schema_id}" if self.schema_id is not None else f"guid:{self.schema_guid}"

    def sort_order(self) -> tuple[int, int, str, tuple[int, ...]]:
        """A total order: ids by number first, then GUIDs, then message indexes."""
        if self.schema_id is not None:
            return (0, self.schema_id, "", self.message_indexes)
        return (1, 0, str(self.schema_guid), self.message_indexes)

    def __str__(self) -> str:
        return f"{self.version}|{'.'.join(map(str, self.message_indexes))}"


class Frame(NamedTuple):
    """Where a record says its schema is, and where its protobuf payload starts.

    A named tuple, not a dataclass: one is built per record, and tuples build fastest.

    Attributes:
        magic: 0 (schema id) or 1 (schema GUID).
        schema_id: the schema id for magic 0, else None.
        schema_guid: lowercase 8-4-4-4-12 GUID for magic 1, else None.
        message_indexes: path of the message type in the schema file, e.g. (0,) or (2, 0, 1).
        payload_offset: where the protobuf payload starts in the record value.
        source: "prefix" when the framing is in the value, "header" when in a record header.
    """

    magic: int
    schema_id: int | None
    schema_guid: str | None
    message_indexes: tuple[int, ...]
    payload_offset: int
    source: Literal["prefix", "header"]

    @property
    def schema_key(self) -> int | str:
        """The schema id, or the GUID when the frame names the schema by GUID."""
        if self.schema_id is not None:
            return self.schema_id
        assert self.schema_guid is not None
        return self.schema_guid

    @property
    def key(self) -> SchemaKey:
        """The frame's :class:`SchemaKey` (schema id or GUID, message indexes)."""
        return SchemaKey(self.schema_id, self.schema_guid, self.message_indexes)


def format_guid(raw: Buffer) -> str:
    """Format 16 bytes as a lowercase 8-4-4-4-12 GUID string."""
    h = bytes(raw).hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def read_message_indexes(buffer: Buffer, offset: int) -> tuple[tuple[int, ...], int]:
    """Read the message-index list at `offset`; return it and the offset after it.

    Raises:
        Truncated: the buffer ends inside the list.
        BadIndexes: negative or absurd count, negative or absurd index, over-long varint.
    """
    if offset >= len(buffer):
        raise Truncated(f"input ends before the message indexes at byte {offset}", offset=offset)
    if buffer[offset] == 0:  # the common single-byte form of [0]
        return _FIRST_MESSAGE, offset + 1
    count, position = read_varint64(buffer, offset)
    if count == 0:  # a zero count means [0] however it is written (`80 00` too)
        return _FIRST_MESSAGE, position
    if count < 0:
        raise BadIndexes(f"negative message index count {count} at byte {offset}", offset=offset)
    if count > MAX_MESSAGE_INDEXES:
        raise BadIndexes(
            f"message index count {count} at byte {offset} exceeds {MAX_MESSAGE_INDEXES}",
            offset=offset,
        )
    indexes = []
    for _ in range(count):
        start = position
        index, position = read_varint64(buffer, position)
        if index < 0 or index > MAX_MESSAGE_INDEX:
            raise BadIndexes(f"message index {index} at byte {start} is out of range", offset=start)
        indexes.append(index)
    return tuple(indexes), position


def _read_schema_ref(buffer: Buffer, where: str) -> tuple[int, int | None, str | None, int]:
    """Read magic, id or GUID; return (magic, schema_id, schema_guid, offset after)."""
    magic = buffer[0]
    if magic == MAGIC_SCHEMA_ID:
        if len(buffer) < 5:
            raise Truncated(f"{where} ends inside the 4-byte schema id", offset=len(buffer))
        return magic, _read_u32(buffer, 1)[0], None, 5
    if magic == MAGIC_SCHEMA_GUID:
        if len(buffer) < 17:
            raise Truncated(f"{where} ends inside the 16-byte schema GUID", offset=len(buffer))
        return magic, None, format_guid(buffer[1:17]), 17
    raise BadMagic(
        f"{where} starts with magic byte 0x{magic:02x}, expected 0x00 (schema id) "
        "or 0x01 (schema GUID)",
        offset=0,
    )


def find_schema_header(headers: Headers | None, *, is_key: bool = False) -> HeaderValue:
    """Return the value of the last schema-id header for the value (or key), else None."""
    if not headers:
        return None
    name = KEY_SCHEMA_ID_HEADER if is_key else VALUE_SCHEMA_ID_HEADER
    if isinstance(headers, Mapping):
        return headers.get(name)
    found: HeaderValue = None
    for key, header_value in headers:
        if isinstance(key, bytes | bytearray):
            key = bytes(key).decode("utf-8", "replace")
        if key == name:
            found = header_value  # last one wins; a null one means "read the prefix"
    return found


def parse_frame(
    value: Buffer | None, headers: Headers | None = None, *, is_key: bool = False
) -> Frame:
    """Parse the framing of a record value (and its headers).

    Args:
        value: the record value (or key, with `is_key=True`).
        headers: the record headers as (key, value) pairs, or a mapping; may be None.
        is_key: look for `__key_schema_id` instead of `__value_schema_id`.

    Raises:
        EmptyValue, BadMagic, Truncated, BadIndexes.
    """
    if not headers and type(value) is bytes:
        # The common frame, `00 | id | 00 | payload` without headers, is fully determined by
        # its first six bytes: frames are immutable, so one per schema id is shared.
        frame: Frame | None = _common_frames.get(value[:6])
        if frame is not None:
            return frame
        if len(value) >= 6 and value[0] == 0 and value[5] == 0:
            frame = _new_tuple(
                Frame, (0, _read_u32(value, 1)[0], None, _FIRST_MESSAGE, 6, "prefix")
            )
            if len(_common_frames) >= _COMMON_FRAMES_MAX:
                _common_frames.clear()
            _common_frames[value[:6]] = frame
            return frame
    if value is None:
        raise EmptyValue("the record value is null (a tombstone)", offset=0)
    header = find_schema_header(headers, is_key=is_key) if headers else None
    if header is not None:
        return _parse_header(header, is_key)
    if len(value) == 0:
        raise EmptyValue("the record value is empty", offset=0)
    magic, schema_id, schema_guid, position = _read_schema_ref(value, "value")
    indexes, position = read_message_indexes(value, position)
    frame = _new_tuple(Frame, (magic, schema_id, schema_guid, indexes, position, "prefix"))
    return frame


def _parse_header(header: Buffer, is_key: bool) -> Frame:
    """The framing held by a schema-id header; the value is then the bare payload."""
    where = "schema header " + (KEY_SCHEMA_ID_HEADER if is_key else VALUE_SCHEMA_ID_HEADER)
    if len(header) == 0:
        raise Truncated(f"{where} is empty", offset=0)
    magic, schema_id, schema_guid, position = _read_schema_ref(header, where)
    indexes, position = read_message_indexes(header, position)
    if position != len(header):
        raise BadIndexes(
            f"{where} has {len(header) - position} bytes after the message indexes",
            offset=position,
        )
    frame: Frame = _new_tuple(Frame, (magic, schema_id, schema_guid, indexes, 0, "header"))
    return frame


def write_message_indexes(indexes: Iterable[int]) -> bytes:
    """Encode message indexes the way Confluent's serializers do (``[0]`` as one ``00``)."""
    items = list(indexes)
    if items == [0]:
        return b"\x00"
    return write_varint32(len(items)) + b"".join(write_varint32(i) for i in items)


def write_frame(
    schema: int | str, message_indexes: Iterable[int] = (0,), payload: bytes = b""
) -> bytes:
    """Build a prefix frame: magic 0 with an int schema id, magic 1 with a GUID string."""
    if isinstance(schema, int):
        head = b"\x00" + schema.to_bytes(4, "big")
    else:
        raw = bytes.fromhex(schema.replace("-", ""))
        if len(raw) != 16:
            raise ValueError(f"{schema!r} is not a 16-byte GUID")
        head = b"\x01" + raw
    return head + write_message_indexes(message_indexes) + payload
