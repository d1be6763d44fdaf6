"""Step 1 of a silver micro-batch: read the Confluent framing of every bronze record.

Runs on the executors, one Arrow batch at a time (``mapInArrow``), calling
``codec.parse_frame`` per record; nothing is decoded here and the registry is not asked.

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

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T  # noqa: N812

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
    from codec import CodecError, parse_frame

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


def _frame_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    names = [f.name for f in FRAMED_FIELDS]
    for batch in batches:
        values = batch.column("value").to_pylist()
        keys = batch.column("key").to_pylist()
        headers = batch.column("headers").to_pylist()
        cols: list[list[Any]] = [[] for _ in names]
        for v, k, h in zip(values, keys, headers, strict=True):
            for col, x in zip(cols, frame_columns(v, k, headers_as_pairs(h)), strict=True):
                col.append(x)
        arrays = [batch.column(c) for c in BRONZE_COLUMNS]
        out_names = list(BRONZE_COLUMNS)
        for field, col in zip(FRAMED_FIELDS, cols, strict=True):
            arrays.append(pa.array(col, type=_ARROW_TYPES[field.name]))
            out_names.append(field.name)
        yield pa.RecordBatch.from_arrays(arrays, names=out_names)


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
