"""Varints as protobuf and Kafka write them: readers `(buffer, offset) -> (value, new_offset)`.

Wire format (https://protobuf.dev/programming-guides/encoding/#varints, Kafka's ByteUtils):
an unsigned varint stores 7 bits a byte, least significant group first; the high bit of a
byte says another byte follows. A 32-bit varint takes at most 5 bytes, a 64-bit one at most
10. Zigzag maps signed to unsigned so small magnitudes stay short: 0->0, -1->1, 1->2, -2->3.

Readers accept `bytes`, `bytearray` or `memoryview`, check the length before every byte they
read and stop after the hard bound, so no input makes them loop or index out of range.

Raises (the only place varints occur in the codec is the message-index list of the framing):
    Truncated: the buffer ends inside the varint (`offset` = where the varint started).
    BadIndexes: the varint is longer than its bound or its value does not fit the width.
"""

from __future__ import annotations

from .errors import BadIndexes, Truncated

Buffer = bytes | bytearray | memoryview

MAX_VARINT32_BYTES = 5
MAX_VARINT64_BYTES = 10
_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1


def _read_uvarint(buffer: Buffer, offset: int, max_bytes: int, bits: int) -> tuple[int, int]:
    end = len(buffer)
    if offset < 0:
        raise ValueError(f"negative offset {offset}")
    result = 0
    shift = 0
    position = offset
    for _ in range(max_bytes):  # the hard bound: never more than max_bytes reads
        if position >= end:
            raise Truncated(f"input ends inside a varint starting at byte {offset}", offset=offset)
        byte = buffer[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if result >> bits:
                raise BadIndexes(
                    f"varint at byte {offset} does not fit in {bits} bits", offset=offset
                )
            return result, position
        shift += 7
    raise BadIndexes(f"varint at byte {offset} is longer than {max_bytes} bytes", offset=offset)


def read_uvarint32(buffer: Buffer, offset: int = 0) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes whose value fits in 32 bits."""
    return _read_uvarint(buffer, offset, MAX_VARINT32_BYTES, 32)


def read_uvarint64(buffer: Buffer, offset: int = 0) -> tuple[int, int]:
    """Read an unsigned varint of at most 10 bytes whose value fits in 64 bits."""
    return _read_uvarint(buffer, offset, MAX_VARINT64_BYTES, 64)


def read_varint32(buffer: Buffer, offset: int = 0) -> tuple[int, int]:
    """Read a zigzag-encoded signed 32-bit varint (Kafka's `ByteUtils.readVarint`)."""
    raw, position = _read_uvarint(buffer, offset, MAX_VARINT32_BYTES, 32)
    return decode_zigzag(raw), position


def read_varint64(buffer: Buffer, offset: int = 0) -> tuple[int, int]:
    """Read a zigzag-encoded signed 64-bit varint (Kafka's `ByteUtils.readVarlong`)."""
    raw, position = _read_uvarint(buffer, offset, MAX_VARINT64_BYTES, 64)
    return decode_zigzag(raw), position


def decode_zigzag(value: int) -> int:
    """Map an unsigned zigzag value back to the signed integer it encodes."""
    return (value >> 1) ^ -(value & 1)


def encode_zigzag32(value: int) -> int:
    """Map a signed 32-bit integer to its unsigned zigzag form."""
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"{value} does not fit in a signed 32-bit integer")
    return ((value << 1) ^ (value >> 31)) & _MASK32


def encode_zigzag64(value: int) -> int:
    """Map a signed 64-bit integer to its unsigned zigzag form."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"{value} does not fit in a signed 64-bit integer")
    return ((value << 1) ^ (value >> 63)) & _MASK64


def _write_uvarint(value: int, bits: int) -> bytes:
    if value < 0 or value >> bits:
        raise ValueError(f"{value} does not fit in an unsigned {bits}-bit integer")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_uvarint32(value: int) -> bytes:
    """Encode an unsigned 32-bit integer as a varint (1 to 5 bytes)."""
    return _write_uvarint(value, 32)


def write_uvarint64(value: int) -> bytes:
    """Encode an unsigned 64-bit integer as a varint (1 to 10 bytes)."""
    return _write_uvarint(value, 64)


def write_varint32(value: int) -> bytes:
    """Encode a signed 32-bit integer as a zigzag varint (Kafka's `writeVarint`)."""
    return _write_uvarint(encode_zigzag32(value), 32)


def write_varint64(value: int) -> bytes:
    """Encode a signed 64-bit integer as a zigzag varint (Kafka's `writeVarlong`)."""
    return _write_uvarint(encode_zigzag64(value), 64)
