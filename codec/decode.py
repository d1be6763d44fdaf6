"""Decode Kafka records: framing -> writer schema -> message type -> protobuf message.

`Decoder.decode(value, headers, is_key)` returns a `DecodedRecord` or raises a `CodecError`
leaf whose `schema_id`, `schema_guid`, `message_indexes` and `message_type` are filled in as far
as decoding got (for the quarantine row). What it gives back (`DecodedRecord`,
`message_to_json`) is in `codec.records`.

Batches are decoded a level down: `codec.payload.decode_payloads` / `decode_sliced` parse many
payloads of one message type at a time (what the silver job calls on its executors, after
framing each distinct frame head once and resolving each schema on the driver).

Payloads are parsed by `codec.payload` (upb-backed protobuf; unknown fields are
`UnknownFields` unless the decoder allows them, detected exactly at any depth).
"""

from __future__ import annotations

from google.protobuf.message import Message

from .descriptors import ResolvedSchema, SchemaResolver, message_class_for
from .errors import CodecError
from .framing import Frame, Headers, parse_frame
from .payload import decode_payload, decode_payloads, has_unknown_fields
from .records import DecodedRecord, message_to_json
from .registry import SchemaRegistry
from .varint import Buffer

__all__ = [
    "DecodedRecord",
    "Decoder",
    "decode_payload",
    "decode_payloads",
    "has_unknown_fields",
    "message_to_json",
]

_TYPE_CACHE_SIZE = 10_000
_new_tuple = tuple.__new__


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
        # (schema id or guid, indexes) -> (schema, type name, class).
        # Frame head of a prefix frame (the bytes before its payload) -> (frame, schema, name,
        # class); `decode`'s fast path looks up six bytes, the head of `00 | id | 00`.
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
            if frame[4] == 6 and frame[0] == 0 and type(value) is bytes:
                self._remember_prefix(value[:6], (frame, schema, found_name, cls))
            offset = frame[4]
            payload = value if offset == 0 else value[offset:]
            message = decode_payload(cls, payload, allow_unknown_fields=self.allow_unknown_fields)
        except CodecError as exc:
            _add_context(exc, frame, found_name)
            raise
        record = _new_tuple(DecodedRecord, (frame, schema, found_name, message))
        return record

    def _remember_prefix(
        self, head: bytes, entry: tuple[Frame, ResolvedSchema, str, type[Message]]
    ) -> None:
        if len(self._by_prefix) >= _TYPE_CACHE_SIZE:
            self._by_prefix.clear()
        self._by_prefix[head] = entry


def _add_context(exc: CodecError, frame: Frame, message_type: str | None) -> None:
    """Record what decoding had found out when it failed (for the quarantine row)."""
    exc.schema_id = frame.schema_id
    exc.schema_guid = frame.schema_guid
    exc.message_indexes = frame.message_indexes
    exc.message_type = exc.message_type or message_type
