"""Step 1 of a silver micro-batch: read the Confluent framing of every bronze record.

Runs on the executors, one Arrow batch at a time (``mapInArrow``); nothing is decoded here
and the registry is not asked. ``codec.parse_frame`` reads one record per distinct frame
head, and every other record with that head gets its columns column-wise (see
:func:`_frame_batch`); records with headers or framed keys are framed one by one.

Output columns (:data:`FRAMED_FIELDS`), beside the bronze columns it keeps (key, value,
topic, partition, offset, timestamp, headers):

- ``_magic int``, ``_schema_id long``, ``_schema_guid string``, ``_message_indexes array<int>``,
  ``_payload_offset int``, ``_schema_key string``: the frame of the value; null when the
  framing is bad.
- ``_frame_code``, ``_frame_stage``, ``_frame_reason`` (strings): the codec's reason code,
  stage and message when the framing is bad (these records go to quarantine), else null.
- ``_key_schema_key string``, ``_key_payload_offset int``: the frame of the key when the key
  is itself Confluent-framed (it is then decoded like a value), else null: an unframed key is
  not a fault, it stays bytes.

``_schema_key`` names one (schema, message type) pair, e.g. ``id:42|1.0`` or
``guid:<guid>|0``: the driver resolves each distinct key once (see ``resolution``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import types as T  # noqa: N812

from codec import CodecError, parse_frame
from codec.framing import find_schema_header

BRONZE_COLUMNS: tuple[str, ...] = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "headers",
)

FRAMED_FIELDS: tuple[T.StructField, ...] = (
    T.StructField("_magic", T.IntegerType()),
    T.StructField("_schema_id", T.LongType()),
    T.StructField("_schema_guid", T.StringType()),
    T.StructField("_message_indexes", T.ArrayType(T.IntegerType(), containsNull=False)),
    T.StructField("_payload_offset", T.IntegerType()),
    T.StructField("_schema_key", T.StringType()),
    T.StructField("_frame_code", T.StringType()),
    T.StructField("_frame_stage", T.StringType()),
    T.StructField("_frame_reason", T.StringType()),
    T.StructField("_key_schema_key", T.StringType()),
    T.StructField("_key_payload_offset", T.IntegerType()),
)


def schema_key(schema_id: int | None, schema_guid: str | None, indexes: Sequence[int]) -> str:
    """The string naming a (writer schema, message indexes) pair, as framing writes it."""
    ref = f"id:{schema_id}" if schema_id is not None else f"guid:{schema_guid}"
    return f"{ref}|{'.'.join(str(i) for i in indexes)}"


def parse_schema_key(key: str) -> tuple[int | None, str | None, tuple[int, ...]]:
    """Inverse of :func:`schema_key`: (schema_id, schema_guid, indexes)."""
    ref, _, idx = key.partition("|")
    kind, _, ident = ref.partition(":")
    indexes = tuple(int(i) for i in idx.split(".")) if idx else ()
    if kind == "id":
        return int(ident), None, indexes
    return None, ident, indexes


def headers_as_pairs(headers: Iterable[Any] | None) -> list[tuple[str, bytes | None]] | None:
    """Bronze headers (Arrow structs {key, value}) as the (key, value) pairs the codec reads."""
    if headers is None:
        return None
    return [(h["key"], h["value"]) for h in headers]


def frame_columns(
    value: bytes | None, key: bytes | None, headers: list[tuple[str, bytes | None]] | None
) -> tuple[Any, ...]:
    """The :data:`FRAMED_FIELDS` values of one record (pure; executors call it per row)."""
    try:
        f = parse_frame(value, headers)
        vals: tuple[Any, ...] = (
            f.magic,
            f.schema_id,
            f.schema_guid,
            list(f.message_indexes),
            f.payload_offset,
            schema_key(f.schema_id, f.schema_guid, f.message_indexes),
            None,
            None,
            None,
        )
    except CodecError as exc:
        vals = (None, None, None, None, None, None, exc.code, exc.stage, str(exc))
    key_key: str | None = None
    key_offset: int | None = None
    if key:
        try:
            kf = parse_frame(key, headers, is_key=True)
            key_key = schema_key(kf.schema_id, kf.schema_guid, kf.message_indexes)
            key_offset = kf.payload_offset
        except CodecError:
            pass  # an unframed key (a plain string id, say) stays bytes
    return (*vals, key_key, key_offset)


_VALUE_COLUMNS = 9  # frame_columns' values for the record value; the last two are the key's
_MEMO_HEADS_PER_REF = 16  # distinct index lists remembered per schema id or GUID
_MEMO_REFS = 1024  # schema ids or GUIDs remembered per executor batch stream


class Framer:
    """:func:`frame_columns` for a stream of records, memoised on the frame's own bytes.

    A prefix frame is read byte by byte from the start (magic, id or GUID, then self-delimiting
    varints) and nothing after the indexes is looked at, so the frame of a value is a function
    of its first ``payload_offset`` bytes: once ``00 | id | indexes`` has been parsed, any value
    that starts with those same bytes has the same frame. A schema-id header's frame is a
    function of the header bytes alone. Those two facts make the memo exact; anything else
    (bad framing, a value with no memo entry yet) goes through :func:`frame_columns`.
    """

    def __init__(self) -> None:
        # (is_key, magic + id or GUID bytes) -> [(frame head bytes, column values)]
        self._prefix: dict[tuple[bool, bytes], list[tuple[bytes, tuple[Any, ...]]]] = {}
        # (is_key, header bytes) -> column values of the frame that header holds
        self._header: dict[tuple[bool, bytes], tuple[Any, ...]] = {}

    def columns(
        self, value: bytes | None, key: bytes | None, headers: list[tuple[str, bytes | None]] | None
    ) -> tuple[Any, ...]:
        """Exactly ``frame_columns(value, key, headers)``."""
        vals = self._value_columns(value, headers)
        if not key:
            return (*vals, None, None)
        key_frame = self._frame(key, headers, is_key=True)
        if key_frame is None:  # an unframed key (a plain string id, say) stays bytes
            return (*vals, None, None)
        return (*vals, key_frame[5], key_frame[4])

    def _value_columns(
        self, value: bytes | None, headers: list[tuple[str, bytes | None]] | None
    ) -> tuple[Any, ...]:
        vals = self._frame(value, headers, is_key=False)
        if vals is None:
            return frame_columns(value, None, headers)[:_VALUE_COLUMNS]  # the error's columns
        return vals

    def _frame(
        self, data: bytes | None, headers: list[tuple[str, bytes | None]] | None, *, is_key: bool
    ) -> tuple[Any, ...] | None:
        """The 9 value columns of ``data``'s frame, or None when ``data`` has no valid frame."""
        if data is None:
            return None
        header = find_schema_header(headers, is_key=is_key) if headers else None
        if header is not None:
            hkey = (is_key, bytes(header))
            vals = self._header.get(hkey)
            if vals is None:
                try:
                    f = parse_frame(data, headers, is_key=is_key)
                except CodecError:
                    return None
                vals = self._header[hkey] = _frame_values(f)
                if len(self._header) > _MEMO_REFS:
                    self._header.clear()
            return vals
        if not data or data[0] > 1:  # empty, or a magic byte that is neither 0 nor 1
            return None
        ref = (is_key, data[:5] if data[0] == 0 else data[:17])
        heads = self._prefix.get(ref)
        if heads is not None:
            for head, vals in heads:
                if data.startswith(head):
                    return vals
        try:
            f = parse_frame(data, None, is_key=is_key)
        except CodecError:
            return None
        vals = _frame_values(f)
        if heads is None:
            if len(self._prefix) >= _MEMO_REFS:
                self._prefix.clear()
            heads = self._prefix[ref] = []
        if len(heads) < _MEMO_HEADS_PER_REF:
            heads.append((data[: f.payload_offset], vals))
        return vals


def _frame_values(f: Any) -> tuple[Any, ...]:
    return (
        f.magic,
        f.schema_id,
        f.schema_guid,
        list(f.message_indexes),
        f.payload_offset,
        schema_key(f.schema_id, f.schema_guid, f.message_indexes),
        None,
        None,
        None,
    )


def _batch_headers(column: pa.Array) -> list[list[tuple[str, bytes | None]] | None]:
    """Per row, the headers as (key, value) pairs; None for a row with none (most rows)."""
    out: list[list[tuple[str, bytes | None]] | None] = [None] * len(column)
    lengths = pc.fill_null(pc.list_value_length(column), 0)
    for i in pc.indices_nonzero(pc.greater(lengths, 0)).to_pylist():
        out[i] = headers_as_pairs(column[i].as_py())
    return out


_VECTOR_HEADS = 16  # distinct frame heads matched column-wise per batch; the rest row by row


def _frame_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    framer = Framer()
    for batch in batches:
        yield _frame_batch(framer, batch)


def _frame_batch(framer: Framer, batch: pa.RecordBatch) -> pa.RecordBatch:
    """The bronze columns of ``batch`` followed by its :data:`FRAMED_FIELDS`."""
    arrays = [batch.column(c) for c in BRONZE_COLUMNS] + _framing_arrays(framer, batch)
    names = [*BRONZE_COLUMNS, *(f.name for f in FRAMED_FIELDS)]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _framing_arrays(framer: Framer, batch: pa.RecordBatch) -> list[pa.Array]:
    """The :data:`FRAMED_FIELDS` arrays of one batch (reads its value, key and headers),
    exactly ``Framer.columns`` row by row.

    Column-wise for the common rows: a prefix frame's columns are a function of its head
    bytes (see :class:`Framer`), so once one row's head ``00 | id | indexes`` is parsed, every
    row whose value starts with those bytes, has no headers and no key that could be a frame
    (null, empty, or a first byte other than 0 and 1) gets the same columns, found with one
    Arrow comparison over the batch. Rows left over (headers, framed keys, bad frames, more
    than ``_VECTOR_HEADS`` distinct heads) go through ``Framer.columns`` one by one.
    """
    n = batch.num_rows
    values = batch.column("value")
    keys = batch.column("key")
    headers = batch.column("headers")
    key_first = pc.binary_slice(keys, 0, 1)
    key_may_frame = pc.or_(
        pc.equal(key_first, pa.scalar(b"\x00", pa.binary())),
        pc.equal(key_first, pa.scalar(b"\x01", pa.binary())),
    )
    plain = pc.and_not(
        pc.invert(pc.fill_null(pc.greater(pc.list_value_length(headers), 0), False)),
        pc.fill_null(key_may_frame, False),
    )
    pending = np.asarray(pc.and_(plain, pc.is_valid(values)), dtype=bool).copy()
    entry = np.full(n, -1, dtype=np.int64)  # row -> its columns in `table`
    table: list[tuple[Any, ...]] = []
    for _ in range(_VECTOR_HEADS):
        rows = np.flatnonzero(pending)
        if not len(rows):
            break
        first = int(rows[0])
        value = values[first].as_py()
        vals = framer._frame(value, None, is_key=False)
        if vals is None:  # no valid frame: this row goes row by row
            pending[first] = False
            continue
        head = value[: vals[4]]
        same = pc.equal(pc.binary_slice(values, 0, len(head)), pa.scalar(head, pa.binary()))
        match = np.asarray(pc.fill_null(same, False), dtype=bool) & pending
        entry[match] = len(table)
        table.append((*vals, None, None))
        pending &= ~match
    leftover = np.flatnonzero(entry < 0).tolist()
    if leftover:
        take = pa.array(leftover, pa.int64())
        row_headers = _batch_headers(headers.take(take))
        for i, value, key, hdrs in zip(
            leftover,
            values.take(take).to_pylist(),
            keys.take(take).to_pylist(),
            row_headers,
            strict=True,
        ):
            entry[i] = len(table)
            table.append(framer.columns(value, key, hdrs))
    index = pa.array(entry, pa.int64())
    transposed = list(zip(*table, strict=True)) if table else [()] * len(FRAMED_FIELDS)
    return [
        pa.array(list(col), type=_ARROW_TYPES[field.name]).take(index)
        for field, col in zip(FRAMED_FIELDS, transposed, strict=True)
    ]


_ARROW_TYPES: dict[str, pa.DataType] = {
    "_magic": pa.int32(),
    "_schema_id": pa.int64(),
    "_schema_guid": pa.string(),
    "_message_indexes": pa.list_(pa.field("element", pa.int32(), nullable=False)),
    "_payload_offset": pa.int32(),
    "_schema_key": pa.string(),
    "_frame_code": pa.string(),
    "_frame_stage": pa.string(),
    "_frame_reason": pa.string(),
    "_key_schema_key": pa.string(),
    "_key_payload_offset": pa.int32(),
}


def frame_records(bronze: DataFrame) -> DataFrame:
    """Add the framing columns to a bronze DataFrame (runs on the executors)."""
    src = bronze.select(*BRONZE_COLUMNS)
    schema = T.StructType([*src.schema.fields, *FRAMED_FIELDS])
    return src.mapInArrow(_frame_batches, schema)


SCHEMA_KEY_FIELDS: tuple[T.StructField, ...] = (
    T.StructField("_schema_key", T.StringType()),
    T.StructField("_key_schema_key", T.StringType()),
    T.StructField("topic", T.StringType()),
)
_KEY_COLUMNS = (5, 9)  # positions of the two schema keys in FRAMED_FIELDS


def _schema_key_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    framer = Framer()
    names = [f.name for f in SCHEMA_KEY_FIELDS]
    for batch in batches:
        arrays = _framing_arrays(framer, batch)
        keys = [arrays[i] for i in _KEY_COLUMNS]
        yield pa.RecordBatch.from_arrays([*keys, batch.column("topic")], names=names)


def schema_keys(bronze: DataFrame) -> DataFrame:
    """Per bronze record, ``_schema_key`` (null: bad framing), ``_key_schema_key`` and its
    Kafka ``topic``.

    What the driver needs before decoding (the distinct keys and their counts, the topics a
    schema came from): only key, value, headers and topic go to the Python workers, three short
    strings come back.
    """
    return bronze.select("key", "value", "headers", "topic").mapInArrow(
        _schema_key_batches, T.StructType(list(SCHEMA_KEY_FIELDS))
    )


def framed_batches_of(
    schema_key: str, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Frame bronze batches on the executor and keep the rows of one schema key."""
    framer = Framer()
    wanted = pa.scalar(schema_key, pa.string())
    for batch in batches:
        framed = _frame_batch(framer, batch)
        keep = pc.fill_null(pc.equal(framed.column("_schema_key"), wanted), False)
        selected = framed.filter(keep)
        if selected.num_rows:
            yield selected
