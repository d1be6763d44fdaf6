"""Step 1 of a silver micro-batch: read the Confluent framing (``codec.framing``) of every
bronze record, once per distinct frame head rather than once per record.

The JVM cuts each record's raw frame head (``frame_heads``: one ``substring``, as long as
the frame when its message indexes are single bytes); only the distinct heads come to the
driver, where ``codec.parse_frame`` reads each once (:class:`Heads`). A cut
head gives what the whole value gives (parsing is sequential: it reads the whole frame, fails
as the value fails, or runs out where the value goes on). The last, records with a
schema-id header, and those of heads beyond the batch's :data:`MAX_PLAN_HEADS` most frequent
(keys that are binary ids starting with a magic byte have a head each), are framed on the
Python workers (:func:`python_framed`), only when a batch has any.
``tests/integration/silver_batch/test_framing_resolution.py`` draws records to prove both
agree with ``codec.parse_frame``.

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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F  # noqa: N812 - pyspark's usual alias
from pyspark.sql import types as T  # noqa: N812

from codec import CodecError, Frame, SchemaKey, Truncated, parse_frame
from lakehouse.bronze_columns import RECORD_COLUMNS

from .frame_heads import (
    IN_PYTHON,
    KEY_HEAD,
    LARGEST_RECORD,
    LATEST_INGESTED,
    VALUE_HEAD,
    frame_heads,
    head_expr,
    head_length,
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
#: the index of a record's schema version among those one pass decodes
#: (:meth:`Heads.records_of_versions`)
VERSION = "_version"


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


# -- the heads, read on the driver ---------------------------------------------------------

#: the most distinct value heads (and key heads) of a batch framed in the JVM, as literals of
#: the plan; the records of the others are framed in Python
MAX_PLAN_HEADS = 256


def _most_frequent(rows: Sequence[Row], column: str, limit: int) -> set[bytes | None]:
    """The ``limit`` heads of ``column`` with the most records (null always kept)."""
    records: dict[bytes | None, int] = {}
    for r in rows:
        head = _bytes(r[column])
        records[head] = records.get(head, 0) + int(r["count"])
    ranked = sorted((h for h in records if h is not None), key=lambda h: (-records[h], h))
    return {*ranked[:limit], None}


_VALUE_FRAME = FRAMED_FIELDS[:9]  # _magic .. _frame_reason
_KEY_FRAME = FRAMED_FIELDS[9:]  # _key_schema_key, _key_payload_offset
_CUT = object()  # a head that ends inside its frame while its value goes on: Python frames it


def _read_value(head: bytes | None) -> tuple[Any, ...] | object:
    cut = head is not None and len(head) >= head_length(head)
    try:
        f = parse_frame(head)
    except Truncated as exc:
        return _CUT if cut else value_error(exc)
    except CodecError as exc:
        return value_error(exc)
    return frame_values(f)


def frame_values(f: Frame) -> tuple[Any, ...]:
    """A value frame's :data:`FRAMED_FIELDS` up to ``_frame_reason`` (no fault)."""
    return (
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


def value_error(exc: CodecError) -> tuple[Any, ...]:
    """The same fields for a value whose framing is bad: the codec's code, stage, message."""
    return (None, None, None, None, None, None, exc.code, exc.stage, str(exc))


def _read_key(head: bytes | None) -> tuple[SchemaKey | None, int | None] | object:
    if not head:
        return (None, None)
    try:
        f = parse_frame(head, is_key=True)
    except Truncated:
        return _CUT if len(head) >= head_length(head) else (None, None)
    except CodecError:
        return (None, None)  # an unframed key (a plain string id, say) stays bytes
    return (f.key, f.payload_offset)


@dataclass(frozen=True)
class Heads:
    """A batch's distinct frame heads, each read once by ``codec.parse_frame``.

    Attributes:
        values: value head -> its :data:`FRAMED_FIELDS` values up to ``_frame_reason``.
        keys: key head -> (``SchemaKey``, payload offset) of a framed key, else (None, None).
        counts: records per (value schema key, key schema key) among those framed here (a
            None value key: a bad frame).
        python: some records are framed in Python (:func:`python_framed`).
        topics: the Kafka topics of each value schema key's records framed here.
        latest_ingested: the latest ``_ingested_at`` of the batch's rows (all of them, framed
            here or in Python); None without that column or with only nulls.
        largest_record: the bytes of the batch's largest record in an Arrow batch
            (``arrow_batches.record_bytes``); None for a batch without records.
    """

    values: dict[bytes | None, tuple[Any, ...]]
    keys: dict[bytes | None, tuple[SchemaKey | None, int | None]]
    counts: dict[tuple[SchemaKey | None, SchemaKey | None], int]
    python: bool
    topics: dict[SchemaKey, set[str]]
    latest_ingested: datetime | None = None
    largest_record: int | None = None

    @classmethod
    def of_rows(cls, rows: Iterable[Row], max_heads: int = MAX_PLAN_HEADS) -> Heads:
        """From :func:`head_counts`' rows: the ``max_heads`` most frequent value heads and
        key heads are framed here, the records of any other head in Python (each head is a
        literal of the plan: keys that are plain binary ids starting with a magic byte would
        otherwise put one per record in it)."""
        rows = list(rows)
        kept_values = _most_frequent(rows, VALUE_HEAD, max_heads)
        kept_keys = _most_frequent(rows, KEY_HEAD, max_heads)
        values: dict[bytes | None, Any] = {}
        keys: dict[bytes | None, Any] = {}
        counts: dict[tuple[SchemaKey | None, SchemaKey | None], int] = {}
        topics: dict[SchemaKey, set[str]] = {}
        python = False
        latest: datetime | None = None
        largest: int | None = None
        for r in rows:
            ingested = r[LATEST_INGESTED]
            if ingested is not None and (latest is None or ingested > latest):
                latest = ingested
            largest = max(largest or 0, int(r[LARGEST_RECORD]))
            vh, kh = _bytes(r[VALUE_HEAD]), _bytes(r[KEY_HEAD])
            if vh not in kept_values or kh not in kept_keys:
                python = True
                continue
            v = values.setdefault(vh, _read_value(vh))
            k = keys.setdefault(kh, _read_key(kh))
            if r[IN_PYTHON] or v is _CUT or k is _CUT:
                python = True
                continue
            pair = (v[5], k[0])  # type: ignore[index]
            counts[pair] = counts.get(pair, 0) + int(r["count"])
            if pair[0] is not None and r["topic"]:
                topics.setdefault(pair[0], set()).add(r["topic"])
        return cls(
            {h: v for h, v in values.items() if v is not _CUT},
            {h: k for h, k in keys.items() if k is not _CUT},
            counts,
            python,
            topics,
            latest,
            largest,
        )

    @classmethod
    def all_in_python(cls, latest_ingested: datetime | None) -> Heads:
        """The heads of a batch whose every record is framed in Python (``driver_pass``):
        none read here."""
        return cls({}, {}, {}, True, {}, latest_ingested)

    def _known(self) -> Column:
        vh, kh = F.col(VALUE_HEAD), F.col(KEY_HEAD)
        v = vh.isNull() | vh.isin(*[h for h in self.values if h is not None])
        k = kh.isNull() | kh.isin(*[h for h in self.keys if h is not None])
        return v & k

    def framed(self, bronze: DataFrame) -> DataFrame:
        """The records framed here, with :data:`FRAMED_FIELDS` (each head's values as
        literals, looked up by the head's position: one ``CASE`` per row and column set)."""
        heads = frame_heads(bronze)
        if self.python:
            heads = heads.where(F.coalesce(self._known(), F.lit(False)) & ~F.col(IN_PYTHON))
        vpos, vcols = _lookup(F.col(VALUE_HEAD), self.values, _VALUE_FRAME, "_vpos")
        kpos, kcols = _lookup(F.col(KEY_HEAD), self.keys, _KEY_FRAME, "_kpos")
        ids = heads.select(*RECORD_COLUMNS, VALUE_HEAD, vpos.alias("_vpos"), kpos.alias("_kpos"))
        return ids.select(*RECORD_COLUMNS, VALUE_HEAD, *vcols, *kcols)

    def records_of(
        self, bronze: DataFrame, framed: DataFrame | None, key: SchemaKey, with_keys: bool
    ) -> DataFrame:
        """The records of value schema key ``key`` with the columns ``decode_records`` reads
        (:meth:`records_of_versions` of ``key`` alone, without its version column)."""
        return self.records_of_versions(bronze, framed, [key], with_keys).drop(VERSION)

    def records_of_versions(
        self,
        bronze: DataFrame,
        framed: DataFrame | None,
        keys: Sequence[SchemaKey],
        with_keys: bool,
    ) -> DataFrame:
        """The records of any of ``keys`` with the columns ``decode_records`` reads
        (``_key_schema_key``/``_key_payload_offset`` only ``with_keys`` and framed keys) and
        :data:`VERSION`, the index in ``keys`` of each record's key: one scan of the batch for
        all of them (``decode_pass.decode_versions``).

        Read from ``bronze`` by head: the rows of the keys' heads, unfiltered when the batch
        holds those keys alone; the payload offset and version looked up by head (literals
        when there is one head). With Python-framed records in the batch, ``framed``'s rows
        of the keys (``framed`` is read only then: None will do otherwise).
        """
        index = {key: i for i, key in enumerate(keys)}
        if self.python:
            if framed is None:
                raise ValueError("some records are framed in Python: their framed batch is needed")
            version = F.coalesce(
                *[F.when(key_matches("_schema_key", k), F.lit(i)) for k, i in index.items()]
            )
            marked = framed.select("*", version.cast("int").alias(VERSION))
            return marked.where(F.col(VERSION).isNotNull())
        mine = {h: (v[4], index[v[5]]) for h, v in self.values.items() if v[5] in index}
        df = bronze.select(*RECORD_COLUMNS)
        head = head_expr("value")
        if len(mine) != len(self.values):
            df = df.where(head.isin(*mine))
        fields = [_VALUE_FRAME[4], T.StructField(VERSION, T.IntegerType())]
        pos, (offset, version) = _lookup(head, mine, fields, "_vpos")
        df = df.select("*", pos.alias("_vpos"))
        df = df.select(*RECORD_COLUMNS, offset.alias("_payload_offset"), version)
        return self._with_key_frames(df, with_keys, VERSION)

    def _with_key_frames(self, df: DataFrame, with_keys: bool, *extra: str) -> DataFrame:
        """``df`` (bronze columns, ``_payload_offset``, ``extra``) with the key frame columns,
        when ``with_keys`` and some key is framed (otherwise ``decode_records`` reads none)."""
        framed_keys = {h: k for h, k in self.keys.items() if k[0] is not None}
        if not (with_keys and framed_keys):  # not read by decode_records: not shipped
            return df
        complete = len(framed_keys) == len(self.keys)
        pos, kcols = _lookup(F.col(KEY_HEAD), framed_keys, _KEY_FRAME, "_kpos", complete)
        df = df.select("*", head_expr("key").alias(KEY_HEAD))
        df = df.select(*RECORD_COLUMNS, "_payload_offset", *extra, pos.alias("_kpos"))
        return df.select(*RECORD_COLUMNS, "_payload_offset", *extra, *kcols)


@dataclass(frozen=True)
class FramedBatch:
    """A micro-batch after step 1: its bronze rows, their :class:`Heads` and the framed
    batch (:meth:`Heads.framed`, plus the Python-framed records if any), planned by
    ``make_framed`` when first read: the decode passes read the bronze rows by head (unless
    some records were framed in Python), so a batch without bad frames, faults, conflicts or
    failed checks never plans it."""

    bronze: DataFrame
    heads: Heads
    make_framed: Callable[[], DataFrame]

    @cached_property
    def framed(self) -> DataFrame:
        return self.make_framed()

    def records_of(self, key: SchemaKey, with_keys: bool) -> DataFrame:
        """The records of ``key`` for ``decode_records`` (:meth:`Heads.records_of`)."""
        return self.heads.records_of(self.bronze, self._framed_if_read(), key, with_keys)

    def records_of_versions(self, keys: Sequence[SchemaKey], with_keys: bool) -> DataFrame:
        """The records of any of ``keys``, with their key's index in it
        (:meth:`Heads.records_of_versions`)."""
        return self.heads.records_of_versions(self.bronze, self._framed_if_read(), keys, with_keys)

    def _framed_if_read(self) -> DataFrame | None:
        """The framed batch when the records of a version are read from it (some records
        framed in Python), else None: the bronze rows are read by head."""
        return self.framed if self.heads.python else None


def _literal(field: T.StructField, value: Any) -> Column:
    if value is None:
        return F.lit(None).cast(field.dataType)
    if isinstance(value, SchemaKey):
        return F.struct(
            F.lit(value.schema_id).cast("long").alias("schema_id"),
            F.lit(value.schema_guid).cast("string").alias("schema_guid"),
            _literal(SCHEMA_KEY_TYPE["message_indexes"], list(value.message_indexes)).alias(
                "message_indexes"
            ),
        )
    if isinstance(value, list):
        return F.array(*[F.lit(i) for i in value]).cast(field.dataType)
    return F.lit(value).cast(field.dataType)


def _lookup(
    head: Column,
    table: Mapping[bytes | None, Sequence[Any]],
    fields: Sequence[T.StructField],
    pos_name: str,
    complete: bool = True,
) -> tuple[Column, list[Column]]:
    """``head``'s 1-based position in ``table`` (one past its end when absent), and each of
    ``fields`` (the table's values, in order) as the literal at the position ``pos_name``: that is a
    column of its own, so the head is compared once per row whatever the number of fields.
    ``complete``: every row's head is in ``table`` (then one head needs no lookup at all)."""
    heads = [h for h in table if h is not None] + ([None] if None in table else [])
    if complete and len(heads) == 1:  # one head: the values are literals, no lookup per row
        (only,) = table.values()
        literals = [
            _literal(f, only[j]).cast(f.dataType).alias(f.name) for j, f in enumerate(fields)
        ]
        return F.lit(1).cast("int"), literals
    miss = len(heads) + 1  # a null at the end of every array: element_at never sees null
    found = F.array_position(F.array(*[F.lit(h) for h in heads if h is not None]), head)
    pos = F.when(head.isNull(), F.lit(len(heads) if None in table else miss)).otherwise(
        F.when(found > 0, found).otherwise(F.lit(miss))
    )
    cols = []
    for j, field in enumerate(fields):
        items = [_literal(field, table[h][j]) for h in heads] + [_literal(field, None)]
        value = F.element_at(F.array(*items), F.col(pos_name))
        cols.append(value.cast(field.dataType).alias(field.name))
    return pos.cast("int"), cols


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def batch_reference_time(heads: Heads, default: datetime) -> datetime:
    """A micro-batch's "now" for the quality rules: the latest ``_ingested_at`` of its rows
    (read with its frame heads, :func:`head_counts`).

    Stable across attempts: a retried batch reads the same bronze rows, whose ``_ingested_at``
    bronze wrote once (``pipelines.silver.batch`` says why the wall clock would lose records).
    ``default`` when the rows have no ``_ingested_at`` column or only nulls.
    """
    # naive in this process's local time as Spark gives it; aware from the driver's Arrow
    latest = heads.latest_ingested
    return default if latest is None else latest.astimezone(UTC)
