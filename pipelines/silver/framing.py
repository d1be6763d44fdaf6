"""Step 1 of a silver micro-batch: read the Confluent framing of every bronze record.

The frame of a record (see ``codec.framing`` for the wire format) is read by Spark SQL
expressions over the first bytes of its value and key, in the JVM, for the frames producers
write: no schema-id header, magic ``00`` and a 4-byte big-endian schema id or magic ``01`` and
a 16-byte GUID, then message indexes whose varints are single bytes (``00`` for ``[0]``, or a
count of at most :data:`MAX_JVM_INDEXES` and as many indexes below 64). Finding the schema keys
of a batch therefore needs no Python worker. Every other record (a schema-id header, a bad
frame, a null value, a long index list) is marked ``_frame_in_python``, and
:func:`python_framed` frames those through ``codec.parse_frame`` on the Python workers
(:func:`frame_columns`), with the codec's reason code when the frame is bad. The JVM
expressions give exactly what ``codec.parse_frame`` gives for the records they take
(``tests/integration/silver_batch/test_framing_resolution.py`` draws records to prove it).

Output columns (:data:`FRAMED_FIELDS`), beside the bronze columns (key, value, topic,
partition, offset, timestamp, headers):

- ``_magic int``, ``_schema_id long``, ``_schema_guid string``, ``_message_indexes array<int>``,
  ``_payload_offset int``: the frame of the value; null when the framing is bad.
- ``_schema_key``: the value's ``codec.SchemaKey`` as a struct (:data:`SCHEMA_KEY_TYPE`:
  schema_id, schema_guid, message_indexes); null when the framing is bad.
- ``_frame_code``, ``_frame_stage``, ``_frame_reason`` (strings): the codec's reason code,
  stage and message when the framing is bad (these records go to quarantine), else null.
- ``_key_schema_key`` (struct), ``_key_payload_offset int``: the frame of the key when the key
  is itself Confluent-framed (it is then decoded like a value), else null: an unframed key is
  not a fault, it stays bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F  # noqa: N812 - pyspark's usual alias
from pyspark.sql import types as T  # noqa: N812

from codec import CodecError, SchemaKey, parse_frame
from codec.framing import KEY_SCHEMA_ID_HEADER, VALUE_SCHEMA_ID_HEADER

BRONZE_COLUMNS: tuple[str, ...] = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "headers",
)

_INDEXES_TYPE = T.ArrayType(T.IntegerType(), containsNull=False)
SCHEMA_KEY_TYPE = T.StructType(
    [
        T.StructField("schema_id", T.LongType()),
        T.StructField("schema_guid", T.StringType()),
        T.StructField("message_indexes", _INDEXES_TYPE),
    ]
)

FRAMED_FIELDS: tuple[T.StructField, ...] = (
    T.StructField("_magic", T.IntegerType()),
    T.StructField("_schema_id", T.LongType()),
    T.StructField("_schema_guid", T.StringType()),
    T.StructField("_message_indexes", _INDEXES_TYPE),
    T.StructField("_payload_offset", T.IntegerType()),
    T.StructField("_schema_key", SCHEMA_KEY_TYPE),
    T.StructField("_frame_code", T.StringType()),
    T.StructField("_frame_stage", T.StringType()),
    T.StructField("_frame_reason", T.StringType()),
    T.StructField("_key_schema_key", SCHEMA_KEY_TYPE),
    T.StructField("_key_payload_offset", T.IntegerType()),
)
IN_PYTHON = "_frame_in_python"
#: the longest message-index list the JVM expressions read (longer ones: Python)
MAX_JVM_INDEXES = 4


def schema_key_of(value: Row | dict[str, Any] | None) -> SchemaKey | None:
    """The ``codec.SchemaKey`` of a ``_schema_key`` struct as Spark or Arrow hands it back."""
    if value is None:
        return None
    return SchemaKey(value["schema_id"], value["schema_guid"], tuple(value["message_indexes"]))


def key_matches(column: str, key: SchemaKey) -> Column:
    """True where the struct ``column`` holds ``key`` (false where it is null)."""
    indexes = F.array(*[F.lit(i) for i in key.message_indexes]).cast(_INDEXES_TYPE)
    return F.coalesce(
        F.col(f"{column}.schema_id").eqNullSafe(F.lit(key.schema_id).cast("long"))
        & F.col(f"{column}.schema_guid").eqNullSafe(F.lit(key.schema_guid).cast("string"))
        & (F.col(f"{column}.message_indexes") == indexes),
        F.lit(False),
    )


# -- in the JVM ------------------------------------------------------------------------------


def _jvm_frame(df: DataFrame, data: str, header: str) -> tuple[DataFrame, dict[str, Column]]:
    """The frame of the binary column ``data``: ``df`` with helper columns (``_<data>_*``),
    and expressions over them: ``ok`` (a frame the expressions read; the other values are
    meaningful only then), ``maybe`` (starts with a magic byte) and the frame's columns.

    Each step is a column of its own, computed once per row (no lambdas, no expression
    repeated inside another), unrolled over the at most :data:`MAX_JVM_INDEXES` indexes.
    """
    p = f"_{data}_"
    hx = f"hex(substring({data}, 1, {18 + MAX_JVM_INDEXES}))"
    df = df.withColumn(f"{p}hx", F.expr(hx))
    at = f"CASE substring({p}hx, 1, 2) WHEN '00' THEN 6 WHEN '01' THEN 18 END"  # index byte
    df = df.withColumn(f"{p}at", F.expr(at))
    for i in range(MAX_JVM_INDEXES + 1):  # the count byte, then the index bytes
        pos = f"2 * ({p}at + {i}) - 1"
        df = df.withColumn(
            f"{p}b{i}", F.expr(f"CAST(conv(substring({p}hx, {pos}, 2), 16, 10) AS INT)")
        )
    c0 = f"{p}b0"
    n = f"CASE WHEN {c0} = 0 THEN 0 WHEN {c0} % 2 = 0 AND {c0} <= {2 * MAX_JVM_INDEXES} THEN {c0} DIV 2 END"
    df = df.withColumn(f"{p}n", F.expr(n))
    single = " AND ".join(
        f"({p}n < {i} OR ({p}b{i} % 2 = 0 AND {p}b{i} < 128))"
        for i in range(1, MAX_JVM_INDEXES + 1)
    )
    has_header = f"coalesce(exists(headers, h -> h.key = '{header}'), false)"
    ok = (
        f"{data} IS NOT NULL AND NOT {has_header} AND {p}n IS NOT NULL"
        f" AND length({data}) >= {p}at + {p}n AND {single}"
    )
    cases = " ".join(
        f"WHEN {k} THEN array({', '.join(f'{p}b{i} DIV 2' for i in range(1, k + 1))})"
        for k in range(1, MAX_JVM_INDEXES + 1)
    )
    h = f"lower(substring({p}hx, 3, 32))"
    guid = (
        f"concat_ws('-', substring({h}, 1, 8), substring({h}, 9, 4), substring({h}, 13, 4),"
        f" substring({h}, 17, 4), substring({h}, 21, 12))"
    )
    df = df.withColumn(f"{p}ok", F.expr(f"coalesce({ok}, false)"))
    df = df.withColumn(f"{p}magic", F.expr(f"CAST(conv(substring({p}hx, 1, 2), 16, 10) AS INT)"))
    magic = F.col(f"{p}magic")
    return df, {
        "ok": F.col(f"{p}ok"),
        "maybe": F.expr(f"substring({data}, 1, 1) IN (X'00', X'01')"),
        "magic": magic,
        "schema_id": F.when(
            magic == 0, F.expr(f"CAST(conv(substring({p}hx, 3, 8), 16, 10) AS BIGINT)")
        ),
        "schema_guid": F.when(magic == 1, F.expr(guid)),
        "indexes": F.expr(f"CASE {p}n WHEN 0 THEN array(0) {cases} END"),
        "offset": F.expr(f"CAST({p}at + {p}n AS INT)"),
    }


def frame_heads(bronze: DataFrame) -> DataFrame:
    """The bronze columns, :data:`FRAMED_FIELDS` as the JVM reads them, and ``IN_PYTHON``: true
    for the records whose value or key frame the JVM does not read (their framing columns
    are null here; :func:`python_framed` frames them in Python)."""
    df, v = _jvm_frame(bronze.select(*BRONZE_COLUMNS), "value", VALUE_SCHEMA_ID_HEADER)
    df, k = _jvm_frame(df, "key", KEY_SCHEMA_ID_HEADER)
    key_header = F.coalesce(
        F.exists("headers", lambda h: h["key"] == KEY_SCHEMA_ID_HEADER), F.lit(False)
    )
    key_framed = (F.length("key") > 0) & k["ok"]
    # an empty or null key, or one whose first byte is no magic (and no key header), is
    # unframed for sure; any other key the JVM does not read goes to Python
    key_unframed = F.col("key").isNull() | (F.length("key") == 0) | (~key_header & ~k["maybe"])
    key_struct = F.struct(
        k["schema_id"].alias("schema_id"),
        k["schema_guid"].alias("schema_guid"),
        k["indexes"].alias("message_indexes"),
    )
    val = v["ok"]
    none = F.lit(None).cast("string")
    return df.select(
        *BRONZE_COLUMNS,
        F.when(val, v["magic"]).alias("_magic"),
        F.when(val, v["schema_id"]).alias("_schema_id"),
        F.when(val, v["schema_guid"]).alias("_schema_guid"),
        F.when(val, v["indexes"]).alias("_message_indexes"),
        F.when(val, v["offset"]).alias("_payload_offset"),
        F.when(
            val,
            F.struct(
                v["schema_id"].alias("schema_id"),
                v["schema_guid"].alias("schema_guid"),
                v["indexes"].alias("message_indexes"),
            ),
        ).alias("_schema_key"),
        none.alias("_frame_code"),
        none.alias("_frame_stage"),
        none.alias("_frame_reason"),
        F.when(key_framed, key_struct).alias("_key_schema_key"),
        F.when(key_framed, k["offset"]).alias("_key_payload_offset"),
        (~val | ~(key_framed | key_unframed)).alias(IN_PYTHON),
    )


def jvm_framed(bronze: DataFrame) -> DataFrame:
    """The records the JVM frames, with :data:`FRAMED_FIELDS` (no Python worker)."""
    return frame_heads(bronze).where(~F.col(IN_PYTHON)).drop(IN_PYTHON)


def python_framed(bronze: DataFrame) -> DataFrame:
    """The other records, framed by ``codec.parse_frame`` on the Python workers."""
    schema = T.StructType([*bronze.select(*BRONZE_COLUMNS).schema.fields, *FRAMED_FIELDS])
    flagged = frame_heads(bronze).where(F.col(IN_PYTHON)).select(*BRONZE_COLUMNS)
    return flagged.mapInArrow(_frame_batches, schema)


def frame_records(bronze: DataFrame) -> DataFrame:
    """The framed batch: every record with :data:`FRAMED_FIELDS` (JVM rows, then Python ones).

    A caller that knows no record needs Python framing (``frame_heads``' count of
    ``IN_PYTHON``) takes :func:`jvm_framed` alone.
    """
    return jvm_framed(bronze).unionByName(python_framed(bronze))


# -- on the Python workers, for the records the JVM does not read --------------------------


def frame_columns(
    value: bytes | None, key: bytes | None, headers: list[tuple[str, bytes | None]] | None
) -> tuple[Any, ...]:
    """The :data:`FRAMED_FIELDS` values of one record, read by ``codec.parse_frame``."""
    try:
        f = parse_frame(value, headers)
        vals: tuple[Any, ...] = (
            f.magic,
            f.schema_id,
            f.schema_guid,
            list(f.message_indexes),
            f.payload_offset,
            f.key,
            None,
            None,
            None,
        )
    except CodecError as exc:
        vals = (None, None, None, None, None, None, exc.code, exc.stage, str(exc))
    key_key: SchemaKey | None = None
    key_offset: int | None = None
    if key:
        try:
            kf = parse_frame(key, headers, is_key=True)
            key_key, key_offset = kf.key, kf.payload_offset
        except CodecError:
            pass  # an unframed key (a plain string id, say) stays bytes
    return (*vals, key_key, key_offset)


def headers_as_pairs(headers: Iterable[Any] | None) -> list[tuple[str, bytes | None]] | None:
    """Bronze headers (Arrow structs {key, value}) as the (key, value) pairs the codec reads."""
    if headers is None:
        return None
    return [(h["key"], h["value"]) for h in headers]


_KEY_FIELDS = ("_schema_key", "_key_schema_key")
_ARROW_KEY = pa.struct(
    [
        pa.field("schema_id", pa.int64()),
        pa.field("schema_guid", pa.string()),
        pa.field("message_indexes", pa.list_(pa.field("element", pa.int32(), nullable=False))),
    ]
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
        yield _frame_batch(batch)


def _frame_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The bronze columns of ``batch`` followed by its :data:`FRAMED_FIELDS`."""
    rows = [
        frame_columns(value, key, headers_as_pairs(headers))
        for value, key, headers in zip(
            batch.column("value").to_pylist(),
            batch.column("key").to_pylist(),
            batch.column("headers").to_pylist(),
            strict=True,
        )
    ]
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(FRAMED_FIELDS)
    arrays = [batch.column(c) for c in BRONZE_COLUMNS]
    for field, column in zip(FRAMED_FIELDS, columns, strict=True):
        values = [_arrow_value(field.name, v) for v in column]
        arrays.append(pa.array(values, type=_ARROW_TYPES[field.name]))
    names = [*BRONZE_COLUMNS, *(f.name for f in FRAMED_FIELDS)]
    return pa.RecordBatch.from_arrays(arrays, names=names)


_ARROW_TYPES: dict[str, pa.DataType] = {
    "_magic": pa.int32(),
    "_schema_id": pa.int64(),
    "_schema_guid": pa.string(),
    "_message_indexes": pa.list_(pa.field("element", pa.int32(), nullable=False)),
    "_payload_offset": pa.int32(),
    "_schema_key": _ARROW_KEY,
    "_frame_code": pa.string(),
    "_frame_stage": pa.string(),
    "_frame_reason": pa.string(),
    "_key_schema_key": _ARROW_KEY,
    "_key_payload_offset": pa.int32(),
}
