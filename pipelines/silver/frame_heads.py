"""Step 1 of a silver micro-batch, its JVM part: each bronze record's frame head cut by one
``substring`` (:func:`head_expr`), and the batch's distinct heads counted
(:func:`head_counts`); no Python worker is involved. The driver reads each distinct head once
(``framing.Heads``).

A head is as long as the frame when its message indexes are single bytes
(:func:`head_length`): magic ``0`` and a 4-byte schema id, or magic ``1`` and a 16-byte GUID,
the index count byte, and up to :data:`MAX_JVM_INDEXES` index bytes; one byte when the first
is no magic.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F  # noqa: N812 - pyspark's usual alias

from codec.framing import (
    KEY_SCHEMA_ID_HEADER,
    MAGIC_SCHEMA_GUID,
    MAGIC_SCHEMA_ID,
    VALUE_SCHEMA_ID_HEADER,
)
from lakehouse.bronze_columns import INGESTED_AT, RECORD_COLUMNS

from .arrow_batches import record_bytes

#: :func:`head_counts`' latest ``_ingested_at`` of each group
LATEST_INGESTED = "_latest_ingested"
#: :func:`head_counts`' largest record of each group (``arrow_batches.record_bytes``)
LARGEST_RECORD = "_largest_record"
VALUE_HEAD = "_value_head"
KEY_HEAD = "_key_head"
#: true for a record with a schema-id header (its frame is not in its bytes: Python frames it)
IN_PYTHON = "_frame_in_python"
#: the longest message-index list a head holds whole (longer ones: Python)
MAX_JVM_INDEXES = 4
_COUNT_AT = {MAGIC_SCHEMA_ID: 5, MAGIC_SCHEMA_GUID: 17}  # where the index count byte is
_COUNTS = {2 * k: k for k in range(MAX_JVM_INDEXES + 1)}  # single-byte count -> indexes


def head_length(head: bytes) -> int:
    """How long the JVM cuts a frame head (:func:`head_expr`'s rule): magic, schema id or
    GUID, the index count byte and, for a count of at most :data:`MAX_JVM_INDEXES`, that many
    index bytes; one byte when the first is no magic. A head shorter than this is the whole
    value."""
    at = _COUNT_AT.get(head[0]) if head else None
    if at is None:
        return 1
    count = head[at] if len(head) > at else -1
    return at + 1 + _COUNTS.get(count, 0)


def head_expr(data: str) -> Column:
    """The frame head of the binary column ``data`` (null when it is null): one
    ``substring``, its length from a ``CASE`` on the first byte and on the count byte."""

    def cut(at: int) -> str:
        cases = " ".join(f"WHEN X'{c:02X}' THEN {at + 1 + k}" for c, k in _COUNTS.items())
        return (
            f"substring({data}, 1, CASE substring({data}, {at + 1}, 1) {cases} ELSE {at + 1} END)"
        )

    magics = " ".join(f"WHEN X'{m:02X}' THEN {cut(at)}" for m, at in _COUNT_AT.items())
    return F.expr(f"CASE substring({data}, 1, 1) {magics} ELSE substring({data}, 1, 1) END")


def frame_heads(bronze: DataFrame, extra: Sequence[str] = ()) -> DataFrame:
    """The bronze columns (and the ``extra`` ones), the value's and the key's frame heads
    (``VALUE_HEAD``, ``KEY_HEAD``) and ``IN_PYTHON`` (a schema-id header for the value or the
    key)."""
    names = F.col("headers.key")
    header = F.coalesce(
        F.array_contains(names, VALUE_SCHEMA_ID_HEADER)
        | F.array_contains(names, KEY_SCHEMA_ID_HEADER),
        F.lit(False),
    )
    return bronze.select(
        *RECORD_COLUMNS,
        *extra,
        head_expr("value").alias(VALUE_HEAD),
        head_expr("key").alias(KEY_HEAD),
        header.alias(IN_PYTHON),
    )


def head_counts(bronze: DataFrame) -> list[Row]:
    """The distinct (value head, key head, ``IN_PYTHON``, ``topic``) of a batch, their
    ``count``, their latest ``_ingested_at`` (:data:`LATEST_INGESTED`, null when bronze has
    no such column) and their largest record's bytes (:data:`LARGEST_RECORD`): the batch's
    reference time and the size of its Arrow batches come with the heads, not from scans of
    their own."""
    ingested = INGESTED_AT in bronze.columns
    heads = frame_heads(bronze, extra=(INGESTED_AT,) if ingested else ())
    latest = F.max(INGESTED_AT) if ingested else F.lit(None).cast("timestamp")
    return (
        heads.groupBy(VALUE_HEAD, KEY_HEAD, IN_PYTHON, "topic")
        .agg(
            F.count(F.lit(1)).alias("count"),
            latest.alias(LATEST_INGESTED),
            F.max(record_bytes()).alias(LARGEST_RECORD),
        )
        .collect()
    )
