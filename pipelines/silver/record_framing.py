"""Step 1 for the records the JVM cannot frame by their heads (a schema-id header, a head cut
short, more heads than :class:`framing.Heads` reads): ``codec.parse_frame`` on the Python
workers, one record at a time, with the same :data:`framing.FRAMED_FIELDS` columns."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - pyspark's usual alias
from pyspark.sql import types as T  # noqa: N812

from codec import CodecError, SchemaKey, parse_frame
from lakehouse.bronze_columns import RECORD_COLUMNS

from .frame_heads import IN_PYTHON, VALUE_HEAD, frame_heads
from .framing import FRAMED_FIELDS, Heads, frame_values, value_error


def python_framed(bronze: DataFrame, heads: Heads) -> DataFrame:
    """The records :class:`Heads` could not frame, framed by ``codec.parse_frame`` on the
    Python workers (same columns as :meth:`Heads.framed`)."""
    rows = (
        frame_heads(bronze)
        .where(~F.coalesce(heads._known(), F.lit(False)) | F.col(IN_PYTHON))
        .select(*RECORD_COLUMNS, VALUE_HEAD)
    )
    schema = T.StructType([*rows.schema.fields, *FRAMED_FIELDS])
    return rows.mapInArrow(_frame_batches, schema)


def frame_columns(
    value: bytes | None, key: bytes | None, headers: list[tuple[str, bytes | None]] | None
) -> tuple[Any, ...]:
    """The :data:`FRAMED_FIELDS` values of one record, read by ``codec.parse_frame``."""
    try:
        vals = frame_values(parse_frame(value, headers))
    except CodecError as exc:
        vals = value_error(exc)
    key_key: SchemaKey | None = None
    key_offset: int | None = None
    if key:
        try:
            kf = parse_frame(key, headers, is_key=True)
            key_key, key_offset = kf.key, kf.payload_offset
        except CodecError:
            pass  # an unframed key (a plain string id, say) stays bytes
    return (*vals, key_key, key_offset)


_KEY_FIELDS = ("_schema_key", "_key_schema_key")
_ARROW_INDEXES = pa.list_(pa.field("element", pa.int32(), nullable=False))
_ARROW_KEY = pa.struct(
    [("schema_id", pa.int64()), ("schema_guid", pa.string()), ("message_indexes", _ARROW_INDEXES)]
)
_ARROW_TYPES: dict[str, pa.DataType] = dict(
    zip(
        [f.name for f in FRAMED_FIELDS],
        [pa.int32(), pa.int64(), pa.string(), _ARROW_INDEXES, pa.int32(), _ARROW_KEY]
        + [pa.string()] * 3
        + [_ARROW_KEY, pa.int32()],
        strict=True,
    )
)


def _arrow_value(name: str, value: Any) -> Any:
    if name in _KEY_FIELDS and value is not None:
        return {
            "schema_id": value.schema_id,
            "schema_guid": value.schema_guid,
            "message_indexes": list(value.message_indexes),
        }
    return value


def _frame_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield frame_batch(batch)


def frame_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The columns of ``batch`` (the bronze columns at least) followed by its
    :data:`FRAMED_FIELDS`, each record framed by :func:`frame_columns`."""
    rows = [
        frame_columns(
            value, key, None if headers is None else [(h["key"], h["value"]) for h in headers]
        )
        for value, key, headers in zip(
            batch.column("value").to_pylist(),
            batch.column("key").to_pylist(),
            batch.column("headers").to_pylist(),
            strict=True,
        )
    ]
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(FRAMED_FIELDS)
    arrays = list(batch.columns)  # the input's columns pass through
    for field, column in zip(FRAMED_FIELDS, columns, strict=True):
        values = [_arrow_value(field.name, v) for v in column]
        arrays.append(pa.array(values, type=_ARROW_TYPES[field.name]))
    names = [*batch.schema.names, *(f.name for f in FRAMED_FIELDS)]
    return pa.RecordBatch.from_arrays(arrays, names=names)
