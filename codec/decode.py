"""Decode a Kafka record: framing -> writer schema -> message type -> protobuf message.

`Decoder.decode(value, headers, is_key)` returns a `DecodedRecord` or raises a `CodecError`
leaf whose `schema_id`, `schema_guid`, `message_indexes` and `message_type` are filled in as far
as decoding got (for the quarantine row). `decode_payload` parses a bare payload with the
upb-backed protobuf runtime; it is the one place protobuf's `DecodeError` becomes `BadPayload`.

Unknown fields: a payload carrying fields its writer schema does not define is
`UnknownFields` by default, so nothing is dropped silently. With `allow_unknown_fields=True`
the message keeps them (they survive re-serialization) and `DecodedRecord.has_unknown_fields`
says so. Detection is exact: protobuf keeps unknown fields when parsing, so the message's size
shrinks when they are discarded if and only if there were any, at any depth.

Invalid UTF-8 in a proto3 `string` is rejected by protobuf and so is `BadPayload`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

from google.protobuf import descriptor_pb2, json_format, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError, Message

from .descriptors import ResolvedSchema, SchemaResolver, message_class_for
from .errors import BadPayload, CodecError, UnknownFields
from .framing import Frame, Headers, parse_frame
from .registry import SchemaRegistry
from .varint import Buffer, write_uvarint64

_TYPE_CACHE_SIZE = 10_000
_new_tuple = tuple.__new__


def _count_unknown_bytes(message: Message) -> int:
    """Bytes of unknown fields anywhere in `message`; discards them as a side effect."""
    before = message.ByteSize()
    message.DiscardUnknownFields()
    return before - message.ByteSize()


_required: dict[type[Message], bool] = {}


def _has_required(message_class: type[Message]) -> bool:
    """True when the type has a proto2 ``required`` field at any depth (cached per class)."""
    try:
        return _required[message_class]
    except KeyError:
        pass
    seen: set[str] = set()
    stack = [message_class.DESCRIPTOR]
    found = False
    while stack and not found:
        desc = stack.pop()
        if desc.full_name in seen:
            continue
        seen.add(desc.full_name)
        for field in desc.fields:
            found = found or field.is_required
            if field.message_type is not None:
                stack.append(field.message_type)
    if len(_required) > _TYPE_CACHE_SIZE:
        _required.clear()
    _required[message_class] = found
    return found


def _missing_paths(message: Message, prefix: str, out: list[str]) -> None:
    """Paths of the unset required fields in `message`, depth first, at most 10.

    Written out because upb's ``FindInitializationErrors`` crashes the interpreter on some
    malformed payloads (seen with protobuf 7.36 on a mutated proto2 message).
    """
    for field in message.DESCRIPTOR.fields:
        if len(out) >= 10:
            return
        name = field.name
        if field.is_required and not message.HasField(name):
            out.append(prefix + name)
        elif field.message_type is not None and not field.message_type.GetOptions().map_entry:
            if field.is_repeated:
                for i, item in enumerate(getattr(message, name)):
                    _missing_paths(item, f"{prefix}{name}[{i}].", out)
            elif message.HasField(name):
                _missing_paths(getattr(message, name), f"{prefix}{name}.", out)
        elif field.message_type is not None:  # a map: values may be messages
            value_field = field.message_type.fields_by_name["value"]
            if value_field.message_type is not None:
                for key, item in getattr(message, name).items():
                    _missing_paths(item, f"{prefix}{name}[{key!r}].", out)


def _missing_required(message: Message) -> BadPayload:
    missing: list[str] = []
    _missing_paths(message, "", missing)
    return BadPayload(
        f"protobuf rejects the payload: {message.DESCRIPTOR.full_name} is missing required "
        f"fields: {', '.join(missing)}"
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
    if _has_required(message_class) and not message.IsInitialized():
        raise _missing_required(message)
    if not allow_unknown_fields:
        # Exact at any depth: protobuf keeps unknown fields, so the size drops on discarding
        # them if and only if there were any (inlined: this runs once per record).
        before = message.ByteSize()
        message.DiscardUnknownFields()
        unknown = before - message.ByteSize()
        if unknown:
            raise UnknownFields(
                f"payload has {unknown} bytes of fields that "
                f"{message_class.DESCRIPTOR.full_name} does not define",
                message_type=message_class.DESCRIPTOR.full_name,
            )
    return message


def decode_payloads(
    message_class: type[Message],
    payloads: Sequence[bytes],
    *,
    allow_unknown_fields: bool = False,
) -> list[Message | CodecError]:
    """`decode_payload` for many payloads of one type: per payload, the message or the error.

    The result is exactly what calling `decode_payload` on each payload gives (same messages,
    same error classes and texts), only faster: all payloads are parsed in one protobuf call,
    as the elements of a `repeated` field of a generated wrapper message
    (``protolake_batch.*``, added once to the class's descriptor pool), and the unknown-field
    check runs once on the wrapper (one wrapper per ~64 KiB of payloads). When a wrapper's
    parse fails, or finds unknown fields, or the wrapper cannot be built, each payload of that
    chunk is decoded on its own to say which ones and why.
    """
    batch_class = _batch_class(message_class) if len(payloads) > 1 else None
    if batch_class is None:
        return _decode_each(message_class, payloads, allow_unknown_fields)
    # One wrapper per ~64 KiB: a wrapper of megabytes parses measurably slower (cache
    # misses), and a bad payload sends only its own chunk to the slow path.
    out: list[Message | CodecError] = []
    start = size = 0
    last = len(payloads) - 1
    for i, payload in enumerate(payloads):
        size += len(payload)
        if size >= _CHUNK_BYTES or i == last:
            chunk = payloads[start : i + 1]
            out += _decode_chunk(batch_class, message_class, chunk, allow_unknown_fields)
            start, size = i + 1, 0
    return out


def _decode_chunk(
    batch_class: type[Message],
    message_class: type[Message],
    payloads: Sequence[bytes],
    allow_unknown_fields: bool,
) -> list[Message | CodecError]:
    """Parse one chunk through the wrapper; on any doubt, each payload on its own."""
    parts: list[bytes] = []
    heads = _ITEM_HEADS
    for payload in payloads:
        size = len(payload)
        head = heads.get(size)
        if head is None:
            head = _ITEM_TAG + write_uvarint64(size)
            if size < 65_536:
                heads[size] = head
        parts.append(head)
        parts.append(payload)
    try:
        wrapper = batch_class.FromString(b"".join(parts))
    except DecodeError:
        wrapper = None  # some payload is bad: the per-payload pass says which
    if wrapper is not None and _has_required(message_class) and not wrapper.IsInitialized():
        wrapper = None  # some payload misses a required field: the per-payload pass says which
    if wrapper is not None and (allow_unknown_fields or _count_unknown_bytes(wrapper) == 0):
        items: list[Message | CodecError] = list(wrapper.items)  # type: ignore[attr-defined]
        return items
    return _decode_each(message_class, payloads, allow_unknown_fields)


def _decode_each(
    message_class: type[Message], payloads: Sequence[bytes], allow_unknown_fields: bool
) -> list[Message | CodecError]:
    out: list[Message | CodecError] = []
    for payload in payloads:
        try:
            out.append(
                decode_payload(message_class, payload, allow_unknown_fields=allow_unknown_fields)
            )
        except CodecError as exc:
            out.append(exc)
    return out


_CHUNK_BYTES = 64 * 1024
_ITEM_TAG = b"\x0a"  # field 1, wire type 2 (length-delimited): one element of `items`
_ITEM_HEADS: dict[int, bytes] = {}
_batch_classes: dict[type[Message], type[Message] | None] = {}
_batch_lock = threading.Lock()


def _batch_class(message_class: type[Message]) -> type[Message] | None:
    """The wrapper ``message B { repeated <message_class> items = 1; }``, or None."""
    try:
        return _batch_classes[message_class]
    except KeyError:
        pass
    with _batch_lock:
        if message_class in _batch_classes:
            return _batch_classes[message_class]
        built: type[Message] | None
        try:
            built = _build_batch_class(message_class.DESCRIPTOR)
        except Exception:  # noqa: BLE001 - an unusual pool only loses the fast path
            built = None
        if len(_batch_classes) > _TYPE_CACHE_SIZE:
            _batch_classes.clear()
        _batch_classes[message_class] = built
        return built


def _build_batch_class(descriptor: Descriptor) -> type[Message]:
    pool = descriptor.file.pool
    digest = hashlib.sha256(f"{descriptor.file.name}\0{descriptor.full_name}".encode()).hexdigest()
    name = f"protolake_batch.B{digest[:24]}"
    try:
        wrapper = pool.FindMessageTypeByName(name)
    except KeyError:
        fdp = descriptor_pb2.FileDescriptorProto(
            name=f"protolake_batch/{digest[:24]}.proto",
            package="protolake_batch",
            syntax="proto2",
            dependency=[descriptor.file.name],
        )
        msg = fdp.message_type.add(name=f"B{digest[:24]}")
        msg.field.add(
            name="items",
            number=1,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
            type_name=f".{descriptor.full_name}",
        )
        pool.Add(fdp)
        wrapper = pool.FindMessageTypeByName(name)
    return message_factory.GetMessageClass(wrapper)


def has_unknown_fields(message: Message) -> bool:
    """True when `message` (at any depth) holds fields its type does not define."""
    copy = type(message)()
    copy.CopyFrom(message)
    return _count_unknown_bytes(copy) > 0


def message_to_json(message: Message) -> dict[str, Any]:
    """The message in protobuf's canonical JSON mapping, with the .proto field names.

    Raises:
        BadPayload: the message has no canonical JSON: a `google.protobuf.Any` holds a type
            the writer schema does not define (the JSON mapping must fail then).
    """
    try:
        return json_format.MessageToDict(
            message,
            preserving_proto_field_name=True,
            descriptor_pool=message.DESCRIPTOR.file.pool,  # resolves google.protobuf.Any
        )
    except (TypeError, KeyError, ValueError) as exc:
        raise BadPayload(
            f"{message.DESCRIPTOR.full_name} has no canonical JSON mapping: {exc}",
            message_type=message.DESCRIPTOR.full_name,
        ) from None


class DecodedRecord(NamedTuple):
    """A decoded record (a named tuple: one is built per record, and tuples build fastest).

    Attributes:
        frame: the framing read from the value or header.
        schema: the compiled writer schema.
        message_type: full name of the message type.
        message: the decoded protobuf message.
    """

    frame: Frame
    schema: ResolvedSchema
    message_type: str
    message: Message

    @property
    def has_unknown_fields(self) -> bool:
        """The message holds fields its writer schema does not define (computed on access;
        only possible with `allow_unknown_fields=True`)."""
        return has_unknown_fields(self.message)

    @property
    def schema_id(self) -> int | None:
        """The schema id the frame named (None for a GUID frame)."""
        return self.frame.schema_id

    @property
    def schema_guid(self) -> str | None:
        """The schema GUID the frame named (None for an id frame)."""
        return self.frame.schema_guid

    @property
    def message_indexes(self) -> tuple[int, ...]:
        """The frame's message indexes."""
        return self.frame.message_indexes

    def to_json(self) -> dict[str, Any]:
        """The message in protobuf's canonical JSON mapping, original field names."""
        return message_to_json(self.message)


class Decoder:
    """Decode Confluent-framed Protobuf records, schemas resolved through a registry.

    Args:
        registry: a `SchemaRegistry`, or a `SchemaResolver` to share its cache.
        allow_unknown_fields: keep records with unknown fields instead of raising.
    """

    def __init__(
        self, registry: SchemaRegistry | SchemaResolver, allow_unknown_fields: bool = False
    ) -> None:
        self.resolver = (
            registry if isinstance(registry, SchemaResolver) else SchemaResolver(registry)
        )
        self.allow_unknown_fields = allow_unknown_fields
        # (schema id or guid, indexes) -> (schema, type name, class): the per-record fast path.
        # First six bytes of a `00 | id | 00` frame -> (frame, schema, name, class).
        self._by_prefix: dict[bytes, tuple[Frame, ResolvedSchema, str, type[Message]]] = {}
        self._types: dict[
            tuple[int | str, tuple[int, ...]], tuple[ResolvedSchema, str, type[Message]]
        ] = {}

    def __repr__(self) -> str:
        return f"Decoder({self.resolver!r}, allow_unknown_fields={self.allow_unknown_fields})"

    def resolve_type(self, frame: Frame) -> tuple[ResolvedSchema, str, type[Message]]:
        """The writer schema, message type name and class a frame names (cached)."""
        key = (frame[1] if frame[1] is not None else frame[2], frame[3])
        found = self._types.get(key)  # type: ignore[arg-type]
        if found is None:
            schema = self.resolver.resolve(frame)
            name = schema.message_type_for(frame.message_indexes)
            found = (schema, name, message_class_for(schema.file_descriptor_set, name))
            if len(self._types) >= _TYPE_CACHE_SIZE:
                self._types.clear()
            self._types[key] = found  # type: ignore[index]
        return found

    def decode(
        self, value: Buffer | None, headers: Headers | None = None, is_key: bool = False
    ) -> DecodedRecord:
        """Decode one record value (or key).

        Raises:
            CodecError: a leaf naming why; `RegistryUnavailable` is not the record's fault.
        """
        if not headers and type(value) is bytes:
            # Fast path for the most common frame, `00 | id | 00 | payload`: its first six
            # bytes determine everything, so a frame seen before skips parsing and lookups.
            hit = self._by_prefix.get(value[:6])
            if hit is not None:
                frame, schema, name, cls = hit
                try:
                    message = decode_payload(
                        cls, value[6:], allow_unknown_fields=self.allow_unknown_fields
                    )
                except CodecError as exc:
                    _add_context(exc, frame, name)
                    raise
                record: DecodedRecord = _new_tuple(DecodedRecord, (frame, schema, name, message))
                return record
        frame = parse_frame(value, headers, is_key=is_key)
        assert value is not None  # parse_frame raised EmptyValue otherwise
        found_name: str | None = None
        try:
            schema, found_name, cls = self.resolve_type(frame)
            offset = frame[4]
            payload = value if offset == 0 else value[offset:]
            message = decode_payload(cls, payload, allow_unknown_fields=self.allow_unknown_fields)
        except CodecError as exc:
            _add_context(exc, frame, found_name)
            raise
        name = found_name
        if offset == 6 and frame[0] == 0 and type(value) is bytes:
            if len(self._by_prefix) >= _TYPE_CACHE_SIZE:
                self._by_prefix.clear()
            self._by_prefix[value[:6]] = (frame, schema, name, cls)
        record = _new_tuple(DecodedRecord, (frame, schema, name, message))
        return record


def _add_context(exc: CodecError, frame: Frame, message_type: str | None) -> None:
    """Record what decoding had found out when it failed (for the quarantine row)."""
    exc.schema_id = frame.schema_id
    exc.schema_guid = frame.schema_guid
    exc.message_indexes = frame.message_indexes
    exc.message_type = exc.message_type or message_type
