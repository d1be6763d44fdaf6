"""Decode Kafka records: framing -> writer schema -> message type -> protobuf message.

`Decoder.decode(value, headers, is_key)` returns a `DecodedRecord` or raises a `CodecError`
leaf whose `schema_id`, `schema_guid`, `message_indexes` and `message_type` are filled in as far
as decoding got (for the quarantine row). `Decoder.decode_many(values, headers, is_key)` gives,
per record, exactly what `decode` returns or raises, for a whole batch at a time: records
framed `00 | id | 00 | payload` without a schema header (what Confluent's serializers write)
are grouped by their first six bytes with C-level bulk operations, each group resolved once
and parsed with `codec.payload.decode_payloads`; every other record goes through `decode`.

Payloads are parsed by `codec.payload` (upb-backed protobuf; unknown fields are
`UnknownFields` unless the decoder allows them, detected exactly at any depth).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import compress
from operator import itemgetter, not_
from typing import Any, NamedTuple, cast, overload

from google.protobuf import json_format
from google.protobuf.message import Message

from .descriptors import ResolvedSchema, SchemaResolver, message_class_for
from .errors import BadPayload, CodecError
from .framing import Frame, Headers, parse_frame
from .gcpause import paused_gc
from .payload import decode_payload, decode_payloads, decode_sliced, has_unknown_fields
from .registry import SchemaRegistry
from .varint import Buffer

__all__ = [
    "DecodedBatch",
    "DecodedRecord",
    "Decoder",
    "decode_payload",
    "decode_payloads",
    "has_unknown_fields",
    "message_to_json",
]

_TYPE_CACHE_SIZE = 10_000
_new_tuple = tuple.__new__
_head = itemgetter(slice(None, 6))


def message_to_json(message: Message) -> dict[str, Any]:
    """The message in protobuf's canonical JSON mapping, with the .proto field names.

    Raises:
        BadPayload: the message has no canonical JSON: a `google.protobuf.Any` holds a type
            the writer schema does not define (the JSON mapping must fail then), or a proto2
            `string` holds bytes that are not UTF-8 (protobuf accepts those in proto2; JSON
            strings cannot carry them).
    """
    bad = _first_non_utf8_string(message, "")
    if bad is not None:
        raise BadPayload(
            f"{message.DESCRIPTOR.full_name} has no canonical JSON mapping: string field "
            f"{bad} holds bytes that are not UTF-8",
            message_type=message.DESCRIPTOR.full_name,
        )
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


def _first_non_utf8_string(message: Message, prefix: str) -> str | None:
    """The path of the first string field whose value is not UTF-8 (protobuf hands those
    out as bytes), or None."""
    for field, value in message.ListFields():
        path = prefix + field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key_field, value_field = field.message_type.fields
            try:
                entries = list(value.items())
            except UnicodeDecodeError:  # protobuf cannot hand out a key that is not UTF-8
                return f"{path} (a key)"
            for key, item in entries:
                if key_field.type == field.TYPE_STRING and isinstance(key, bytes):
                    return f"{path} (a key)"
                if value_field.type == field.TYPE_STRING and isinstance(item, bytes):
                    return f"{path}[{key!r}]"
                if value_field.message_type is not None:
                    found = _first_non_utf8_string(item, f"{path}[{key!r}].")
                    if found is not None:
                        return found
            continue
        items = value if field.is_repeated else (value,)
        if field.type == field.TYPE_STRING:
            if any(isinstance(item, bytes) for item in items):
                return path
        elif field.message_type is not None:
            for item in items:
                found = _first_non_utf8_string(item, path + ".")
                if found is not None:
                    return found
    return None


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

    def decode_many(
        self,
        values: Sequence[Buffer | None],
        headers: Sequence[Headers | None] | None = None,
        is_key: bool = False,
    ) -> DecodedBatch:
        """Decode a batch of record values (or keys): per record, what `decode` gives.

        Args:
            values: the record values (or keys, with `is_key=True`).
            headers: each record's headers (same length as `values`), or None for none.
            is_key: read `__key_schema_id` headers instead of `__value_schema_id`.

        Returns:
            A `DecodedBatch`: per record, in order, the message that `decode` returns for it
            (with its frame, schema and type) or the `CodecError` leaf that `decode` raises
            for it (same class, same text, same context). The registry is asked once per
            distinct schema, not per record.

        Raises:
            RegistryUnavailable: the registry cannot be reached; no record is to blame, so
                the whole batch is left undecoded (retry it).
            ValueError: `headers` is not as long as `values`.
        """
        count = len(values)
        if headers is not None and len(headers) != count:
            raise ValueError(f"{len(headers)} headers for {count} values")
        with paused_gc():  # the batch keeps all its messages: collections would free nothing
            return self._decode_many(values, headers, is_key)

    def _decode_many(
        self,
        values: Sequence[Buffer | None],
        headers: Sequence[Headers | None] | None,
        is_key: bool,
    ) -> DecodedBatch:
        count = len(values)
        batch = DecodedBatch(count)
        # Rows that may take the grouped path: bytes values without headers.
        rows: Sequence[int]
        candidates: Sequence[bytes]
        if (headers is None or not any(headers)) and set(map(type, values)) == {bytes}:
            rows, candidates = range(count), cast("Sequence[bytes]", values)
        else:
            rows = [
                i
                for i in range(count)
                if type(values[i]) is bytes and not (headers is not None and headers[i])
            ]
            candidates = [cast(bytes, values[i]) for i in rows]
        heads = list(map(_head, candidates))
        one_by_one = set(range(count)).difference(rows) if len(rows) < count else set()
        for _, members in _group_rows(heads):
            positions: Sequence[int] = range(len(candidates)) if members is None else members
            while positions:
                positions = self._decode_framed_alike(
                    candidates, rows, positions, values, batch, one_by_one
                )
        for i in sorted(one_by_one):
            try:
                record = self.decode(values[i], headers[i] if headers is not None else None, is_key)
            except CodecError as exc:
                if not exc.record_fault:
                    raise
                batch.results[i] = exc
            else:
                batch.set_record(i, record)
        return batch

    def _decode_framed_alike(
        self,
        candidates: Sequence[bytes],
        rows: Sequence[int],
        positions: Sequence[int],
        values: Sequence[Buffer | None],
        batch: DecodedBatch,
        one_by_one: set[int],
    ) -> Sequence[int]:
        """Decode the candidates at `positions` that are framed as the first one is.

        The candidates at `positions` share their first six bytes. The first one's frame is
        read; every candidate with the same frame head (the bytes before the payload) has
        the same frame, so they are resolved once and decoded together. Returns the
        positions left for another round (other frame heads). When the first one's frame
        cannot be read, every candidate whose frame cannot be read goes to `one_by_one`.
        """
        first = candidates[positions[0]]
        entry = self._by_prefix.get(first[:6])
        if entry is None:
            try:
                frame = parse_frame(first)
            except CodecError:
                # Bad frames in this group: each of them goes one by one (`decode` says
                # why), the others to the next rounds. One pass, not one per bad frame.
                parsed = []
                for position in positions:
                    try:
                        parse_frame(candidates[position])
                    except CodecError:
                        one_by_one.add(rows[position])
                    else:
                        parsed.append(position)
                return parsed
            found = self._head_entry(first[: frame.payload_offset], frame)
        else:
            found = entry
            frame = entry[0]
        size = frame.payload_offset
        rest: Sequence[int] = ()
        group = positions
        if size != 6:  # the frame head is longer than the six bytes they share
            head = first[:size]
            same = list(
                map(
                    head.__eq__,
                    map(itemgetter(slice(None, size)), map(candidates.__getitem__, positions)),
                )
            )
            group = list(compress(positions, same))
            rest = list(compress(positions, map(not_, same)))
        group_rows = rows if len(group) == len(rows) else [rows[p] for p in group]
        if isinstance(found, CodecError):
            for i in group_rows:
                batch.results[i] = found.copy()
        else:
            self._decode_group(found, values, group_rows, size, batch)
        return rest

    def _head_entry(
        self, head: bytes, frame: Frame
    ) -> tuple[Frame, ResolvedSchema, str, type[Message]] | CodecError:
        """What every record starting with `head` (its frame head) decodes against, or the
        error every such record gets when the schema or type cannot be resolved."""
        entry = self._by_prefix.get(head)
        if entry is not None:
            return entry
        try:
            schema, name, cls = self.resolve_type(frame)
        except CodecError as exc:
            if not exc.record_fault:
                raise
            _add_context(exc, frame, None)
            return exc
        entry = (frame, schema, name, cls)
        self._remember_prefix(head, entry)
        return entry

    def _decode_group(
        self,
        entry: tuple[Frame, ResolvedSchema, str, type[Message]],
        values: Sequence[Buffer | None],
        group: Sequence[int],
        offset: int,
        batch: DecodedBatch,
    ) -> None:
        """Decode the rows `group` of `values`, which all have `entry`'s frame head."""
        frame, schema, name, cls = entry
        everything = len(group) == len(values)
        members = values if everything else [values[i] for i in group]
        results, clean = decode_sliced(
            cls, cast("Sequence[bytes]", members), offset, self.allow_unknown_fields
        )
        if clean and everything:  # the common case: one schema, every payload decoded
            batch.results = results
            batch.frames = [frame] * len(results)
            batch.schemas = [schema] * len(results)
            batch.message_types = [name] * len(results)
            return
        for i, result in zip(group, results, strict=True):
            batch.results[i] = result
            if isinstance(result, CodecError):
                _add_context(result, frame, name)
            else:
                batch.frames[i] = frame
                batch.schemas[i] = schema
                batch.message_types[i] = name


class DecodedBatch:
    """What `Decoder.decode_many` found, record by record, as columns.

    A sequence: ``batch[i]`` is record i's `DecodedRecord`, or the `CodecError` leaf that
    `Decoder.decode` raises for it. The columns hold the same without building a record
    object per row (records of one schema share their frame, schema and type name).

    Attributes:
        results: per record, the decoded message, or the error.
        frames, schemas, message_types: per record, its frame, writer schema and full
            message type name; None where `results` holds an error (the error carries the
            schema id or GUID, indexes and type as far as decoding got).
    """

    __slots__ = ("frames", "message_types", "results", "schemas")

    def __init__(self, count: int) -> None:
        self.results: list[Message | CodecError] = [None] * count  # type: ignore[list-item]
        self.frames: list[Frame | None] = [None] * count
        self.schemas: list[ResolvedSchema | None] = [None] * count
        self.message_types: list[str | None] = [None] * count

    def set_record(self, i: int, record: DecodedRecord) -> None:
        """Store a decoded record at position i."""
        self.frames[i], self.schemas[i], self.message_types[i], self.results[i] = record

    def __len__(self) -> int:
        return len(self.results)

    @overload
    def __getitem__(self, i: int) -> DecodedRecord | CodecError: ...
    @overload
    def __getitem__(self, i: slice) -> list[DecodedRecord | CodecError]: ...
    def __getitem__(
        self, i: int | slice
    ) -> DecodedRecord | CodecError | list[DecodedRecord | CodecError]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        result = self.results[i]
        if isinstance(result, CodecError):
            return result
        record: DecodedRecord = _new_tuple(
            DecodedRecord, (self.frames[i], self.schemas[i], self.message_types[i], result)
        )
        return record

    def __iter__(self) -> Iterator[DecodedRecord | CodecError]:
        return (self[i] for i in range(len(self.results)))

    def __repr__(self) -> str:
        errors = sum(isinstance(r, CodecError) for r in self.results)
        return f"DecodedBatch({len(self)} records, {errors} errors)"


def _group_rows(heads: list[bytes]) -> list[tuple[bytes, list[int] | None]]:
    """Each distinct head with the positions that have it (None: all of them)."""
    if not heads or heads.count(heads[0]) == len(heads):
        return [(head, None) for head in heads[:1]]
    distinct = dict.fromkeys(heads)
    if len(distinct) <= 8:  # a C-level scan per head beats a Python loop over the rows
        positions = range(len(heads))
        return [(head, list(compress(positions, map(head.__eq__, heads)))) for head in distinct]
    groups: dict[bytes, list[int]] = {}
    for position, head in enumerate(heads):
        groups.setdefault(head, []).append(position)
    return list(groups.items())


def _add_context(exc: CodecError, frame: Frame, message_type: str | None) -> None:
    """Record what decoding had found out when it failed (for the quarantine row)."""
    exc.schema_id = frame.schema_id
    exc.schema_guid = frame.schema_guid
    exc.message_indexes = frame.message_indexes
    exc.message_type = exc.message_type or message_type
