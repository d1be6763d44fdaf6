"""Step 5 of a silver micro-batch, for several schema versions: their records decoded in one
pass through the Python workers (:func:`decode_versions`), not one pass (and one scan of the
batch) per version; :func:`decode_all` decodes every version a batch takes this way, and a
batch of one version as ``decode.decode_records`` does.

A pass's rows: ``_version`` (the index of the record's version), one struct column per
version (:func:`version_column`: the message's columns in that version's rows, null in the
others), then the lineage and error columns of ``decode.decoded_schema``;
:func:`version_rows` gives one version's rows back in ``decode.decode_records``' schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F  # noqa: N812 - pyspark's usual alias
from pyspark.sql import types as T  # noqa: N812

from codec import SchemaKey
from lakehouse.bronze_columns import RECORD_COLUMNS

from .decode import (
    DECODE_INPUT,
    LINEAGE_DECODE_FIELDS,
    DecodeSpec,
    decode_batches,
    decode_version,
    message_spark_schema,
    row_converter,
)
from .framing import VERSION, FramedBatch

# At most this many schema versions share a pass: each row carries a null struct column for
# every other version of its pass, and each version's rows are read from the kept pass.
VERSIONS_PER_PASS = 8


def _as_is(df: DataFrame) -> DataFrame:
    return df


def decode_all(
    batch: FramedBatch,
    specs: Mapping[SchemaKey, DecodeSpec],
    keep: Callable[[DataFrame], DataFrame] = _as_is,
    count_failures: bool = False,
) -> dict[SchemaKey, DecodedVersion]:
    """The records of each schema version of ``specs`` decoded, in :func:`decode_records`'
    schema. Each pass goes through ``keep`` as soon as it is planned (every outcome reads a
    pass: the batch keeps it computed, ``lakehouse.materialized``, and frees what ``keep``
    saw even when a later pass fails).

    One version alone is decoded as it is (:func:`decode_version`); several go through the
    Python workers together (:func:`decode_versions`, up to :data:`VERSIONS_PER_PASS` a
    pass): one scan of the batch, one pass, one query to plan and keep for them all.

    ``count_failures``: each version's failures are counted while ``keep`` computes its pass
    (an ``Observation``: no job of its own); ``keep`` must then run it (``materialize``).
    """
    if count_failures and keep is _as_is:
        raise ValueError("count_failures needs a keep that computes each pass")
    keys = list(specs)
    with_keys = any(s.key_types for s in specs.values())
    versions: dict[SchemaKey, DecodedVersion] = {}
    for start in range(0, len(keys), VERSIONS_PER_PASS):
        chunk = keys[start : start + VERSIONS_PER_PASS]
        if len(chunk) == 1:
            decoded = decode_version(batch.records_of(chunk[0], with_keys), specs[chunk[0]])
        else:
            records = batch.records_of_versions(chunk, with_keys)
            decoded = decode_versions(records, [specs[k] for k in chunk])
        observation = Observation() if count_failures else None
        if observation is not None:
            decoded = decoded.observe(observation, *_failure_counts(len(chunk)))
        decoded = keep(decoded)
        failures = observation.get if observation is not None else {}
        for i, key in enumerate(chunk):
            rows = decoded if len(chunk) == 1 else version_rows(decoded, i)
            versions[key] = DecodedVersion.of(rows, failures.get(f"failed_{i}"))
    return versions


def _failure_counts(versions: int) -> list[Column]:
    """Aggregates of a pass's failed records, ``failed_<i>`` for its version ``i``."""
    failed = F.col("_decode_code").isNotNull()
    if versions == 1:
        return [F.count_if(failed).alias("failed_0")]
    return [
        F.count_if(failed & (F.col(VERSION) == i)).alias(f"failed_{i}") for i in range(versions)
    ]


@dataclass(frozen=True)
class DecodedVersion:
    """One schema version's decoded rows (:func:`decode_records`' schema), how many of them
    failed to decode (None: not counted), and the same rows as Arrow when they were decoded in
    the driver (``driver_pass``: their DataFrame is then made when first read)."""

    make_rows: Callable[[], DataFrame]
    failures: int | None = None
    arrow: pa.Table | None = None

    @classmethod
    def of(cls, rows: DataFrame, failures: int | None = None) -> DecodedVersion:
        return cls(lambda: rows, failures)

    @cached_property
    def rows(self) -> DataFrame:
        return self.make_rows()


def version_column(index: int) -> str:
    """The struct column of :func:`decode_versions` that holds version ``index``'s message."""
    return f"_v{index}"


def decode_versions(records: DataFrame, specs: Sequence[DecodeSpec]) -> DataFrame:
    """The framed records of several schema versions decoded in one pass through the Python
    workers, instead of one pass (and one scan of the batch) per version.

    ``records`` carry :data:`VERSION`, the index of each record's spec in ``specs``
    (``framing.Heads.records_of_versions``). Output: ``_version``, one struct column per
    version (:func:`version_column`: the message's columns in that version's rows, null in
    the others), then the lineage and error columns of :func:`decoded_schema`. A version's rows
    in :func:`decode_records`' schema: :func:`version_rows`.
    """
    messages = [
        message_spark_schema(s.file_descriptor_set, s.message_type, s.max_depth) for s in specs
    ]
    schema = T.StructType(
        [
            T.StructField(VERSION, T.IntegerType()),
            *[T.StructField(version_column(i), m) for i, m in enumerate(messages)],
            *LINEAGE_DECODE_FIELDS,
        ]
    )
    with_keys = any(s.key_types for s in specs)
    columns = DECODE_INPUT if with_keys else DECODE_INPUT[: len(RECORD_COLUMNS) + 1]

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return decode_version_batches(specs, batches)

    return records.select(*columns, VERSION).mapInArrow(run, schema)


def version_rows(decoded: DataFrame, index: int) -> DataFrame:
    """Version ``index``'s rows of :func:`decode_versions`' output, in the schema
    :func:`decode_records` gives them."""
    lineage = [f.name for f in LINEAGE_DECODE_FIELDS]
    mine = decoded.where(F.col(VERSION) == index)
    return mine.select(f"{version_column(index)}.*", *lineage)


def decode_version_batches(
    specs: Sequence[DecodeSpec], batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Each batch's rows grouped by version, decoded by :func:`decode_batches` with their
    version's spec, each output batch laid out as :func:`decode_versions` says."""
    types = [pa.struct(list(row_converter(s).arrow_schema)) for s in specs]
    for batch in batches:
        versions = batch.column(VERSION)
        for index in pc.unique(versions).to_pylist():
            rows = pc.indices_nonzero(pc.equal(versions, index))
            for out in decode_batches(specs[index], [batch.take(rows)]):
                yield _in_version_layout(out, index, types)


def _in_version_layout(
    out: pa.RecordBatch, index: int, types: list[pa.StructType]
) -> pa.RecordBatch:
    """A :func:`decode_batches` output batch of version ``index``: its message columns moved
    into that version's struct column, the other versions' columns null."""
    n = out.num_rows
    split = out.num_columns - len(LINEAGE_DECODE_FIELDS)
    if split:
        message = pa.StructArray.from_arrays(out.columns[:split], fields=list(types[index]))
    else:  # a message without fields: nothing to hold (its rows keep their lineage)
        message = pa.nulls(n, types[index])
    columns: list[pa.Array] = [pa.repeat(pa.scalar(index, pa.int32()), n)]
    columns += [message if i == index else pa.nulls(n, t) for i, t in enumerate(types)]
    columns += out.columns[split:]
    names = [VERSION, *(version_column(i) for i in range(len(types)))]
    names += [f.name for f in LINEAGE_DECODE_FIELDS]
    return pa.RecordBatch.from_arrays(columns, names=names)
