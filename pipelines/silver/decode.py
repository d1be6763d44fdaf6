"""Step 5 of a silver micro-batch: decode the records of the batch's schema versions.

Runs on the executors (``mapInArrow``), in the one pass a record makes through the Python
workers: ``decode_pass.decode_all`` sends the framed rows of every schema version the batch
takes (framed by JVM expressions, ``framing``) through the workers together
(``decode_pass.decode_versions``), a batch of one version alone through :func:`decode_records`; only
their bytes and frame offsets go to Python. Per Arrow batch and version, the compiled decoder
(``pipelines.proto_types.native_decoder``) turns the payloads straight into typed Arrow
columns; the records it gives back, and all records when it is off or has no plan for the
type, are parsed with ``codec.decode_payloads`` against their writer schema
(``codec.message_class_for`` compiles the descriptor set once per executor process) and
converted by ``pipelines.proto_types.RowConverter``. Both paths give the same rows.

A version's rows (:func:`decoded_schema`; ``decode_pass.version_rows`` of a pass over several): the
message's columns, then

- ``_key binary`` (raw key, always) and ``_key_decoded string``: when the key is itself
  Confluent-framed and decodes, its canonical JSON mapping (original field names), else null.
  Keys are JSON text, not a struct, because one table may hold records whose keys were
  written with different key schemas (or none): a JSON column keeps one table schema.
- ``_kafka_topic, _kafka_partition, _kafka_offset, _kafka_timestamp``: lineage.
- ``_decode_code, _decode_stage, _decode_reason``: set (``BAD_PAYLOAD`` / ``UNKNOWN_FIELDS``)
  when the payload does not decode; such a row has null message columns and carries the raw
  ``_value`` and ``_headers`` for the quarantine. Decoded rows leave those null.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T  # noqa: N812

from codec import (
    CodecError,
    SchemaKey,
    decode_payload,
    decode_payloads,
    message_class_for,
    message_to_json,
)
from codec.payload import decode_sliced
from lakehouse.bronze_columns import RECORD_COLUMNS

from .framing import schema_key_of

LINEAGE_DECODE_FIELDS: tuple[T.StructField, ...] = (
    T.StructField("_key", T.BinaryType()),
    T.StructField("_key_decoded", T.StringType()),
    T.StructField("_kafka_topic", T.StringType()),
    T.StructField("_kafka_partition", T.IntegerType()),
    T.StructField("_kafka_offset", T.LongType()),
    T.StructField("_kafka_timestamp", T.TimestampType()),
    T.StructField("_decode_code", T.StringType()),
    T.StructField("_decode_stage", T.StringType()),
    T.StructField("_decode_reason", T.StringType()),
    T.StructField("_value", T.BinaryType()),
    T.StructField(
        "_headers",
        T.ArrayType(
            T.StructType(
                [T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())]
            )
        ),
    ),
)
# the framed columns decode_batches reads (the rest of the framing stays in the JVM)
DECODE_INPUT = (
    *RECORD_COLUMNS,
    "_payload_offset",
    "_key_schema_key",
    "_key_payload_offset",
)
ERROR_COLUMNS = ("_decode_code", "_decode_stage", "_decode_reason", "_value", "_headers")


@dataclass(frozen=True)
class DecodeSpec:
    """Everything an executor needs to decode one schema version (pickled into the task)."""

    file_descriptor_set: bytes
    message_type: str
    max_depth: int
    allow_unknown_fields: bool
    # key schema key -> (descriptor set, message type), for keys that are framed themselves
    key_types: Mapping[SchemaKey, tuple[bytes, str]]
    # use the compiled decoder where it has a plan (``silver.native_decoder``)
    native: bool = True


@lru_cache(maxsize=256)
def message_spark_schema(fds: bytes, message_type: str, max_depth: int) -> T.StructType:
    """The Spark schema of a message type's columns (pipelines.proto_types' mapping). Computed
    once per descriptor set, type and depth (a batch asks for it in several steps, every
    batch): callers build new schemas from it, never change it."""
    from pipelines.proto_types import spark_schema_for

    descriptor = message_class_for(fds, message_type).DESCRIPTOR
    return spark_schema_for(descriptor, max_depth, file_descriptor_set=fds)


def decoded_schema(message_schema: T.StructType) -> T.StructType:
    """Output schema of :func:`decode_records`: message columns, then lineage and errors."""
    return T.StructType([*message_schema.fields, *LINEAGE_DECODE_FIELDS])


_CONVERTERS: dict[tuple[bytes, str, int], Any] = {}


def row_converter(spec: DecodeSpec) -> Any:
    from pipelines.proto_types import RowConverter

    cache_key = (spec.file_descriptor_set, spec.message_type, spec.max_depth)
    conv = _CONVERTERS.get(cache_key)
    if conv is None:
        cls = message_class_for(spec.file_descriptor_set, spec.message_type)
        conv = RowConverter(
            cls.DESCRIPTOR, spec.max_depth, file_descriptor_set=spec.file_descriptor_set
        )
        if len(_CONVERTERS) > 256:  # bounded: a long-lived executor sees many versions
            _CONVERTERS.clear()
        _CONVERTERS[cache_key] = conv
    return conv


def decode_key(
    spec: DecodeSpec, key: bytes | None, key_schema_key: SchemaKey | None, offset: int | None
) -> str | None:
    """The canonical JSON of a framed key, or None (unframed, unknown or undecodable key)."""
    if key is None or key_schema_key is None or offset is None:
        return None
    kt = spec.key_types.get(key_schema_key)
    if kt is None:
        return None
    try:
        msg = decode_payload(message_class_for(kt[0], kt[1]), key[offset:])
        return json.dumps(message_to_json(msg), sort_keys=True, separators=(",", ":"))
    except CodecError:
        return None


def decode_batches(spec: DecodeSpec, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Decode framed bronze batches (all of one schema version) into typed batches.

    With ``spec.native`` and a plan for the type, the compiled decoder
    (``pipelines.proto_types._native``) decodes each batch straight from the Arrow buffers;
    the rows it gives back, and every row without it, take the upb path below.
    """
    conv = row_converter(spec)
    native = _native(spec, conv) if spec.native else None
    for batch in batches:
        if spec.key_types:
            keys = batch.column("key").to_pylist()
            key_keys = [schema_key_of(k) for k in batch.column("_key_schema_key").to_pylist()]
            key_offsets = batch.column("_key_payload_offset").to_pylist()
            key_json: list[str | None] | None = [
                decode_key(spec, k, kk, ko)
                for k, kk, ko in zip(keys, key_keys, key_offsets, strict=True)
            ]
        else:  # no framed keys in this batch: skip the per-row call
            key_json = None
        if native is None:
            rows = list(range(batch.num_rows))
        else:
            fast, rows = native.decode(batch.column("value"), batch.column("_payload_offset"))
            if not rows:
                yield _assemble(batch, None, list(fast.columns), conv.arrow_schema, key_json, None)
                continue
            if fast.num_rows:
                given_back = set(rows)
                fast_idx = [i for i in range(batch.num_rows) if i not in given_back]
                yield _assemble(
                    batch, fast_idx, list(fast.columns), conv.arrow_schema, key_json, None
                )
        yield from _decode_upb(spec, conv, batch, rows, key_json)


def _decode_upb(
    spec: DecodeSpec,
    conv: Any,
    batch: pa.RecordBatch,
    rows: list[int],
    key_json: list[str | None] | None,
) -> Iterator[pa.RecordBatch]:
    """Rows ``rows`` of ``batch`` through ``codec.decode_payloads`` and the RowConverter."""
    cls = message_class_for(spec.file_descriptor_set, spec.message_type)
    msg_schema: pa.Schema = conv.arrow_schema
    take = pa.array(rows, type=pa.int64())
    values = batch.column("value").take(take).to_pylist()
    offsets = batch.column("_payload_offset").take(take).to_pylist()
    good_idx: list[int] = []
    messages: list[Any] = []
    bad_idx: list[int] = []
    errors: list[tuple[str, str, str]] = []
    if len(set(offsets)) == 1:  # one frame head (the usual case): sliced as they are parsed
        results = decode_sliced(cls, values, offsets[0], spec.allow_unknown_fields)[0]
    else:
        payloads = [v[off:] for v, off in zip(values, offsets, strict=True)]
        results = decode_payloads(cls, payloads, allow_unknown_fields=spec.allow_unknown_fields)
    for row, result in zip(rows, results, strict=True):
        if isinstance(result, CodecError):
            bad_idx.append(row)
            errors.append((result.code, result.stage, str(result)))
        else:
            messages.append(result)
            good_idx.append(row)
    decoded = _convert(conv, messages, good_idx, bad_idx, errors)
    if good_idx:
        yield _assemble(batch, good_idx, list(decoded.columns), msg_schema, key_json, None)
    if bad_idx:
        nulls = [pa.nulls(len(bad_idx), type=f.type) for f in msg_schema]
        yield _assemble(batch, bad_idx, nulls, msg_schema, key_json, errors)


_NATIVE: dict[tuple[bytes, str, int], Any] = {}


def _native(spec: DecodeSpec, conv: Any) -> Any:
    """The compiled decoder of ``spec``'s type, or None; built once per executor process."""
    from pipelines.proto_types import native_decoder

    cache_key = (spec.file_descriptor_set, spec.message_type, spec.max_depth)
    if cache_key not in _NATIVE:
        if len(_NATIVE) > 256:  # bounded, like _CONVERTERS
            _NATIVE.clear()
        _NATIVE[cache_key] = native_decoder(conv.descriptor, conv.arrow_schema, spec.max_depth)
    return _NATIVE[cache_key]


def _convert(
    conv: Any,
    messages: list[Any],
    good_idx: list[int],
    bad_idx: list[int],
    errors: list[tuple[str, str, str]],
) -> pa.RecordBatch:
    """Convert the decoded messages; one that cannot become a row moves to the bad rows
    (``BAD_PAYLOAD``: protobuf accepted bytes that the row mapping cannot represent, e.g. a
    proto2 string that is not UTF-8), and the rest are converted again."""
    from pipelines.proto_types import RowConversionError

    while True:
        try:
            return conv.to_record_batch(messages)
        except RowConversionError as exc:
            if exc.index is None:
                raise
            bad_idx.append(good_idx.pop(exc.index))
            messages.pop(exc.index)
            errors.append(("BAD_PAYLOAD", "payload", f"cannot convert to a row: {exc}"))


def _assemble(
    batch: pa.RecordBatch,
    idx: list[int] | None,
    message_cols: list[pa.Array],
    msg_schema: pa.Schema,
    key_json: list[str | None] | None,
    errors: list[tuple[str, str, str]] | None,
) -> pa.RecordBatch:
    """One output batch: rows ``idx`` of ``batch`` (None: all, in order) beside their columns."""

    def pick(name: str) -> pa.Array:
        column = batch.column(name)
        return column if take is None else column.take(take)

    take = None if idx is None else pa.array(idx, type=pa.int32())
    n = batch.num_rows if idx is None else len(idx)
    cols: list[pa.Array] = list(message_cols)
    cols.append(pick("key"))
    if key_json is None:
        cols.append(pa.nulls(n, pa.string()))
    elif idx is None:
        cols.append(pa.array(key_json, type=pa.string()))
    else:
        cols.append(pa.array([key_json[i] for i in idx], type=pa.string()))
    cols.append(pick("topic"))
    cols.append(pick("partition"))
    cols.append(pick("offset"))
    cols.append(pick("timestamp"))
    if errors is None:
        cols += [pa.nulls(n, pa.string())] * 3
        cols.append(pa.nulls(n, pa.binary()))
        cols.append(pa.nulls(n, batch.schema.field("headers").type))
    else:
        cols.append(pa.array([e[0] for e in errors], pa.string()))
        cols.append(pa.array([e[1] for e in errors], pa.string()))
        cols.append(pa.array([e[2] for e in errors], pa.string()))
        cols.append(pick("value"))
        cols.append(pick("headers"))
    names = [f.name for f in msg_schema] + [f.name for f in LINEAGE_DECODE_FIELDS]
    return pa.RecordBatch.from_arrays(cols, names=names)


def decode_records(framed: DataFrame, spec: DecodeSpec, message_schema: T.StructType) -> DataFrame:
    """Decode the framed rows of ``framed`` (already filtered to one schema version).

    Only :data:`DECODE_INPUT` goes to the Python workers (without its key frame columns when
    ``spec`` has no key schemas): every column shipped costs a JVM -> Arrow -> Python copy per
    record.
    """

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return decode_batches(spec, batches)

    return framed.select(*decode_input(spec)).mapInArrow(run, decoded_schema(message_schema))


def decode_input(spec: DecodeSpec) -> tuple[str, ...]:
    """The framed columns :func:`decode_batches` reads for ``spec``: without key schemas, not
    the key frame columns (two columns of nulls cost as much as the payloads to ship,
    bench/silver_bench.py)."""
    return DECODE_INPUT if spec.key_types else DECODE_INPUT[: len(RECORD_COLUMNS) + 1]


def decode_version(records: DataFrame, spec: DecodeSpec) -> DataFrame:
    """The framed records of one schema version (``spec``'s descriptor set and message type)
    decoded into the message's Spark schema (:func:`decode_records`)."""
    schema = message_spark_schema(spec.file_descriptor_set, spec.message_type, spec.max_depth)
    return decode_records(records, spec, schema)
