"""Parse bare protobuf payloads with the upb-backed runtime, one or many at a time.

`decode_payload` parses one payload; it is the one place protobuf's `DecodeError` becomes
`BadPayload`. `decode_payloads` gives exactly what `decode_payload` gives on each payload of
a list, faster: the payloads are parsed in one protobuf call as the elements of a `repeated`
field of a generated wrapper message, and every per-payload step is a C-level bulk operation
(`map`, slice assignment, `bytes.join`), not a Python loop.

Unknown fields: a payload carrying fields its writer schema does not define is
`UnknownFields` by default, so nothing is dropped silently. With `allow_unknown_fields=True`
the message keeps them (they survive re-serialization). Detection is exact, two ways:

- by equality (tried first): discard the unknown fields and encode the message; if that
  gives back the input bytes exactly, there were none, since parsing the encoding of a
  message without unknown fields yields none (two walks of the message: discard, encode).
  Producers write the canonical encoding, so this is the usual answer.
- by size (when the bytes differ): protobuf keeps unknown fields when parsing, so the encoded
  size of a fresh parse exceeds that of the discarded one if and only if there were any, at
  any depth. A type whose valid input has once re-encoded to other bytes (protobuf writes map
  entries in its own order, for one) goes straight to the size test from then on (three
  walks: size, discard, size).

Either way the check walks the whole parsed message, so it costs a good part of a parse:
strict decoding is slower than keeping unknown fields (`bench/codec_bench.py`). Protobuf's
discard stops 62 levels down; types that can nest deeper (recursive ones) are checked at
every depth a parse accepts (`codec.depth`).

Invalid UTF-8 in a proto3 `string` is rejected by protobuf and so is `BadPayload`; so is a
proto2 payload missing a `required` field at any depth.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from operator import itemgetter

from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError, Message

from .depth import discard_unknown, is_shallow, may_nest_deep, parse_shallow
from .errors import BadPayload, CodecError, UnknownFields
from .generated import generated_class
from .varint import Buffer, write_uvarint64
from .walk import child_messages, reachable_types

_TYPE_CACHE_SIZE = 10_000


def _count_unknown_bytes(message: Message, deep: bool = False) -> int:
    """Bytes of unknown fields anywhere in `message`; discards them as a side effect.

    `deep`: the message may nest deeper than ``DiscardUnknownFields`` reaches (`codec.depth`).
    """
    before = message.ByteSize()
    discard_unknown(message, deep)
    return before - message.ByteSize()


class _TypeFacts:
    """What the payload paths know about a message type (one per class).

    `has_required`: a proto2 ``required`` field at any depth, extensions included.
    `has_any`: a ``google.protobuf.Any`` at any depth (or the type itself).
    `may_nest_deep`: messages can nest deeper than protobuf's discard reaches
    (`codec.depth`); `wrapped_may_nest_deep`: the same inside the batch path's wrapper, one
    level more.
    `equality_pays`: the equality test has not yet met this type's input that was valid but
    not canonical (protobuf re-encodes map entries in its own order, for one); after that,
    the size test is used.
    """

    __slots__ = (
        "equality_pays",
        "has_any",
        "has_required",
        "may_nest_deep",
        "wrapped_may_nest_deep",
    )

    def __init__(self, descriptor: Descriptor) -> None:
        types = reachable_types(descriptor)
        self.has_required = any(field.is_required for desc in types for field in desc.fields)
        self.has_any = any(desc.full_name == _ANY for desc in types)
        self.equality_pays = True
        self.may_nest_deep = may_nest_deep(descriptor)
        self.wrapped_may_nest_deep = may_nest_deep(descriptor, levels_above=1)


_facts: dict[type[Message], _TypeFacts] = {}


def _facts_of(message_class: type[Message]) -> _TypeFacts:
    facts = _facts.get(message_class)
    if facts is None:
        if len(_facts) > _TYPE_CACHE_SIZE:
            _facts.clear()
        facts = _facts[message_class] = _TypeFacts(message_class.DESCRIPTOR)
    return facts


def _missing_paths(message: Message, prefix: str, out: list[str]) -> None:
    """Paths of the unset required fields in `message`, depth first, at most 10.

    Written out because upb's ``FindInitializationErrors`` crashes the interpreter on some
    malformed payloads (seen with protobuf 7.36 on a mutated proto2 message).
    """
    for field in message.DESCRIPTOR.fields:
        if field.is_required and not message.HasField(field.name) and len(out) < 10:
            out.append(prefix + field.name)
    for path, child in child_messages(message):
        if len(out) >= 10:
            return
        if child is None:
            out.append(f"{prefix}{path}[a key that is not UTF-8]")
        else:
            _missing_paths(child, f"{prefix}{path}.", out)


def _missing_required(message: Message) -> BadPayload:
    missing: list[str] = []
    _missing_paths(message, "", missing)
    return BadPayload(
        f"protobuf rejects the payload: {message.DESCRIPTOR.full_name} is missing required "
        f"fields: {', '.join(missing) or '(at a place the walk could not name)'}"
    )


def decode_payload(
    message_class: type[Message], payload: Buffer, *, allow_unknown_fields: bool = False
) -> Message:
    """Parse a bare protobuf payload into `message_class`.

    Raises:
        BadPayload: protobuf rejects the bytes (malformed wire data, invalid UTF-8, a proto2
            ``required`` field missing at any depth, ...).
        UnknownFields: the payload has fields the class does not define (unless allowed).
    """
    data = payload if type(payload) is bytes else bytes(payload)
    try:
        message = message_class.FromString(data)
    except DecodeError as exc:
        raise BadPayload(f"protobuf rejects the payload: {exc}") from None
    # upb's parse does not check `required` (its serializer does, so the size check below
    # would raise EncodeError): a message missing one is not a message of its type
    facts = _facts_of(message_class)
    if facts.has_required and not message.IsInitialized():
        raise _missing_required(message)
    if not allow_unknown_fields:
        deep = facts.may_nest_deep and not is_shallow(message_class, data)
        unknown = _unknown_bytes(message, data, facts, deep)
        if unknown:
            raise UnknownFields(
                f"payload has {unknown} bytes of fields that "
                f"{message_class.DESCRIPTOR.full_name} does not define",
                message_type=message_class.DESCRIPTOR.full_name,
            )
    if facts.has_any:
        error = _packed_error(message, allow_unknown_fields, "")
        if error is not None:
            raise error
    return message


_ANY = "google.protobuf.Any"
_ANY_DEPTH = 16  # an Any inside the message packed in an Any inside ...: each is a parse
_any_depth = threading.local()  # how many packed messages deep this thread is


def _packed_error(message: Message, allow_unknown_fields: bool, path: str) -> CodecError | None:
    """The error of the first ``google.protobuf.Any`` in `message` (itself included) whose
    packed message is not a valid payload of its type, or None.

    An `Any` holds a message as bytes: protobuf parses it only when the message is unpacked
    (by the JSON mapping, say), which would drop its unknown fields without a word and fail
    on bytes that do not parse. So a packed message whose type the writer schema's files
    define is decoded here as a payload of its own, with the same checks (unknown fields,
    required fields, UTF-8), at any depth. A type the files do not define stays opaque bytes:
    nothing is lost, and the JSON mapping says it cannot render it.
    """
    if message.DESCRIPTOR.full_name == _ANY:
        return _check_packed(message, allow_unknown_fields, path or "the top")
    for name, child in child_messages(message):
        # only into sub-messages whose type can hold an Any (a Timestamp, a line item ... not)
        if child is not None and _facts_of(type(child)).has_any:
            error = _packed_error(child, allow_unknown_fields, f"{path}.{name}" if path else name)
            if error is not None:
                return error
    return None


def _check_packed(packed: Message, allow_unknown_fields: bool, path: str) -> CodecError | None:
    type_url: str = packed.type_url  # type: ignore[attr-defined]
    if not type_url:
        return None
    pool = packed.DESCRIPTOR.file.pool
    name = type_url.rpartition("/")[2]
    try:
        descriptor = pool.FindMessageTypeByName(name)
    except KeyError:
        return None  # a type the schema does not define: opaque bytes, kept as they are
    level = getattr(_any_depth, "level", 0)
    if level >= _ANY_DEPTH:
        return BadPayload(f"google.protobuf.Any nested more than {_ANY_DEPTH} deep at {path}")
    _any_depth.level = level + 1
    try:
        decode_payload(
            message_factory.GetMessageClass(descriptor),
            packed.value,  # type: ignore[attr-defined]
            allow_unknown_fields=allow_unknown_fields,
        )
    except CodecError as exc:
        return type(exc)(f"the {name} packed in google.protobuf.Any at {path}: {exc.message}")
    finally:
        _any_depth.level = level
    return None


def decode_payloads(
    message_class: type[Message],
    payloads: Sequence[Buffer],
    *,
    allow_unknown_fields: bool = False,
) -> list[Message | CodecError]:
    """`decode_payload` for many payloads of one type: per payload, the message or the error.

    The result is exactly what calling `decode_payload` on each payload gives (same messages,
    same error classes and texts), only faster: one wrapper message
    ``B { repeated <message_class> items = 1; }`` (`codec.generated`, added once to the
    class's descriptor pool) per ~64 KiB of payloads is built with bulk operations and parsed
    in one protobuf call, and the unknown-field and required-field checks run once on it.
    When a wrapper's parse fails, or a check finds something, or the wrapper cannot be
    built, each payload of that chunk is decoded on its own to say which ones and why.
    """
    return decode_sliced(message_class, payloads, 0, allow_unknown_fields)[0]


def decode_sliced(
    message_class: type[Message],
    buffers: Sequence[Buffer],
    offset: int,
    allow_unknown_fields: bool,
) -> tuple[list[Message | CodecError], bool]:
    """`decode_payloads` of ``buffer[offset:]`` for each buffer, and whether all decoded.

    Every buffer holds at least `offset` bytes. Slicing happens while the wrapper is built,
    so a caller whose payloads sit after a frame head (the silver job's upb path, records of
    one frame head) does not make a list of slices first.
    """
    batch_class = _batch_class(message_class) if len(buffers) > 1 else None
    if batch_class is None:
        return _decode_each(message_class, buffers, offset, allow_unknown_fields), False
    if type(buffers) is not list or set(map(type, buffers)) != {bytes}:
        # len() of a memoryview counts its items, not its bytes; a deque cannot be sliced
        buffers = [b if type(b) is bytes else bytes(b) for b in buffers]
    sizes = list(map(len, buffers))  # of the buffers: the item heads subtract the offset
    count = len(buffers)
    # One wrapper per ~64 KiB: a wrapper of megabytes parses measurably slower (cache
    # misses), and a bad payload sends only its own chunk to the slow path. Chunks hold the
    # same number of payloads (by their average size): no running total per payload.
    payload_bytes = sum(sizes) - offset * count
    if payload_bytes <= _CHUNK_BYTES:  # one chunk
        return _decode_chunk(
            batch_class, message_class, buffers, sizes, offset, allow_unknown_fields
        )
    step = max(1, _CHUNK_BYTES * count // payload_bytes)
    out: list[Message | CodecError] = []
    clean = True
    for start in range(0, count, step):
        decoded, ok = _decode_chunk(
            batch_class,
            message_class,
            buffers[start : start + step],
            sizes[start : start + step],
            offset,
            allow_unknown_fields,
        )
        out += decoded
        clean = clean and ok
    return out, clean


class _ItemHeads(dict[int, bytes]):
    """Buffer size -> the bytes that open one `items` element holding the buffer's payload
    (the bytes after `offset`)."""

    def __init__(self, offset: int) -> None:
        super().__init__()
        self.offset = offset

    def __missing__(self, size: int) -> bytes:
        head = _ITEM_TAG + write_uvarint64(size - self.offset)
        if len(self) < 65_536:
            self[size] = head
        return head


class _HeadTables(dict[int, _ItemHeads]):
    """Offset -> its `_ItemHeads` (a few offsets: one per frame head size)."""

    def __missing__(self, offset: int) -> _ItemHeads:
        table = _ItemHeads(offset)
        if len(self) < 64:
            self[offset] = table
        return table


_CHUNK_BYTES = 64 * 1024
_ITEM_TAG = b"\x0a"  # field 1, wire type 2 (length-delimited): one element of `items`
_item_heads = _HeadTables()


def _decode_chunk(
    batch_class: type[Message],
    message_class: type[Message],
    buffers: Sequence[Buffer],
    sizes: list[int],
    offset: int,
    allow_unknown_fields: bool,
) -> tuple[list[Message | CodecError], bool]:
    """Parse one chunk through the wrapper; on any doubt, each payload on its own."""
    parts: list[Buffer] = [b""] * (2 * len(sizes))
    parts[0::2] = map(_item_heads[offset].__getitem__, sizes)
    parts[1::2] = map(itemgetter(slice(offset, None)), buffers) if offset else buffers
    data = b"".join(parts)
    facts = _facts_of(message_class)
    if facts.wrapped_may_nest_deep and not allow_unknown_fields:
        # None also when a payload nests deeper than the discard reaches: one by one then
        wrapper = parse_shallow(batch_class, data)
    else:
        try:
            wrapper = batch_class.FromString(data)
        except DecodeError:
            wrapper = None  # some payload is bad: the per-payload pass says which
    if wrapper is not None and facts.has_required and not wrapper.IsInitialized():
        wrapper = None  # some payload misses a required field: the per-payload pass says which
    if wrapper is not None and not allow_unknown_fields and _unknown_bytes(wrapper, data, facts):
        wrapper = None  # some payload has unknown fields: the per-payload pass says which
    if wrapper is not None and facts.has_any:
        if _packed_error(wrapper, allow_unknown_fields, "") is not None:
            wrapper = None  # some packed message is bad: the per-payload pass says which
    if wrapper is None:
        return _decode_each(message_class, buffers, offset, allow_unknown_fields), False
    items: list[Message | CodecError] = list(wrapper.items)  # type: ignore[attr-defined]
    return items, True


def _unknown_bytes(message: Message, data: bytes, facts: _TypeFacts, deep: bool = False) -> int:
    """Bytes of unknown fields anywhere in `message`, parsed from `data` (0: none).

    Discards them as a side effect. The equality test when it has paid off for the type so
    far, else (and whenever it cannot decide) the size test; see the module docstring.
    `deep`: the message nests deeper than ``DiscardUnknownFields`` reaches (`codec.depth`).
    """
    if not facts.equality_pays:
        return _count_unknown_bytes(message, deep)
    discard_unknown(message, deep)
    encoded = message.SerializeToString()
    if encoded == data:
        return 0  # the input is the encoding of a message without unknown fields
    # Not the canonical encoding, or unknown fields were discarded: the size test decides.
    unknown = type(message).FromString(data).ByteSize() - len(encoded)
    if not unknown:
        facts.equality_pays = False  # valid input that protobuf encodes differently
    return unknown


def _decode_each(
    message_class: type[Message],
    buffers: Sequence[Buffer],
    offset: int,
    allow_unknown_fields: bool,
) -> list[Message | CodecError]:
    out: list[Message | CodecError] = []
    for buffer in buffers:
        try:
            out.append(
                decode_payload(
                    message_class,
                    buffer[offset:] if offset else buffer,
                    allow_unknown_fields=allow_unknown_fields,
                )
            )
        except CodecError as exc:
            out.append(exc)
    return out


def _batch_class(message_class: type[Message]) -> type[Message] | None:
    """The wrapper ``message B { repeated <message_class> items = 1; }``, or None."""
    return generated_class(message_class, "batch", _add_batch)


def _add_batch(fdp: descriptor_pb2.FileDescriptorProto, inner: str) -> str:
    fdp.syntax = "proto2"
    fdp.message_type.add(name="B").field.add(
        name="items",
        number=1,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
        type_name=inner,
    )
    return "B"


def has_unknown_fields(message: Message) -> bool:
    """True when `message` (at any depth) holds fields its type does not define."""
    copy = type(message)()
    copy.CopyFrom(message)
    return _count_unknown_bytes(copy, _facts_of(type(message)).may_nest_deep) > 0
