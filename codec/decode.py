"""Decode Kafka records: framing -> writer schema -> message type -> protobuf message.

`Decoder.decode(value, headers, is_key)` returns a `DecodedRecord` or raises a `CodecError`
leaf whose `schema_id`, `schema_guid`, `message_indexes` and `message_type` are filled in as far
as decoding got (for the quarantine row). `Decoder.decode_many(values, headers, is_key)` gives,
per record, exactly what `decode` returns or raises, for a whole batch at a time: records
framed by a prefix and without a schema header are grouped by their frame head (the bytes
before the payload; `00 | id | 00` for what Confluent's serializers write by default) with
C-level bulk operations, each group is resolved once and parsed with
`codec.payload.decode_sliced`; every other record goes through `decode`. What they give back
(`DecodedRecord`, `DecodedBatch`, `message_to_json`) is in `codec.records`.

Payloads are parsed by `codec.payload` (upb-backed protobuf; unknown fields are
`UnknownFields` unless the decoder allows them, detected exactly at any depth).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, repeat
from operator import itemgetter, not_
from typing import cast

from google.protobuf.message import Message

from .descriptors import ResolvedSchema, SchemaResolver, message_class_for
from .errors import CodecError
from .framing import Frame, Headers, parse_frame
from .gcpause import paused_gc
from .payload import decode_payload, decode_payloads, decode_sliced, has_unknown_fields
from .records import DecodedBatch, DecodedRecord, message_to_json
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
        one_by_one = set(range(count)).difference(rows) if len(rows) < count else set()
        for members in _group_rows(candidates):
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
            members = (
                candidates
                if len(positions) == len(candidates)
                else map(candidates.__getitem__, positions)
            )
            same = list(map(bytes.startswith, members, repeat(head)))
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
            cls,
            cast("Sequence[bytes]", members),
            offset,
            self.allow_unknown_fields,
            all_bytes=type(members) is list,  # the grouped rows hold bytes only
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


def _group_rows(candidates: Sequence[bytes]) -> list[list[int] | None]:
    """The positions of the candidates sharing each distinct head (their first six bytes;
    None: one head, at every position)."""
    if not candidates:
        return []
    # The common case, one head for all, without making a head per candidate.
    first = candidates[0][:6]
    if len(first) == 6 and all(map(bytes.startswith, candidates, repeat(first))):
        return [None]
    heads = list(map(_head, candidates))
    distinct = dict.fromkeys(heads)
    if len(distinct) <= 8:  # a C-level scan per head beats a Python loop over the rows
        positions = range(len(heads))
        return [list(compress(positions, map(head.__eq__, heads))) for head in distinct]
    groups: dict[bytes, list[int]] = {}
    for position, head in enumerate(heads):
        groups.setdefault(head, []).append(position)
    return list(groups.values())


def _add_context(exc: CodecError, frame: Frame, message_type: str | None) -> None:
    """Record what decoding had found out when it failed (for the quarantine row)."""
    exc.schema_id = frame.schema_id
    exc.schema_guid = frame.schema_guid
    exc.message_indexes = frame.message_indexes
    exc.message_type = exc.message_type or message_type
