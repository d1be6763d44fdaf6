"""Steps 1 and 5 of a small silver micro-batch in the driver: its bronze rows collected once as
Arrow, framed and decoded in this process, the later steps reading local relations.

A stream's micro-batch is small (hundreds to a few thousand records), and on the Spark path
its cost is each job's fixed cost, paid by every pass over the batch: planning the scan of the
bronze Delta table, the frame heads' aggregation, the Python framing of the records a head is
not enough for, the decode pass through the Python workers and keeping it computed. For a batch
of at most :data:`DRIVER_RECORDS` records, :func:`collect_small` reads the bronze rows once
(one job), and the batch goes on from those rows:

- each record is framed here by ``record_framing.frame_batch`` (``codec.parse_frame``, what
  the Spark path runs for the records its heads do not frame), and counted per schema key;
- each schema version's records are decoded here by ``decode.decode_batches``, the function the
  Python workers run (:meth:`SmallBatch.decode`), their failures counted from the rows;
- each table's rows are assembled as Arrow (``arrow_rows``), checked in this process where the
  checker can (``QualityChecker.validate_arrow``) and appended by delta-rs
  (``lakehouse.driver_append``);
- the quarantine rows (bad frames, failed resolutions, schema conflicts, decode and quality
  failures) are picked from those rows as Arrow (``arrow_rejects``), and appended by delta-rs
  with the tables;
- what the other steps read as DataFrames (a version's decoded rows when a table's columns
  need Spark's alignment, rows the checker validates with Spark, the framed rows their
  failures are joined to) are local relations of those rows (``createDataFrame`` of Arrow,
  below Spark's ``spark.sql.execution.arrow.localRelationThreshold``), made when first read:
  a batch whose checks all run in the driver sends no row to the JVM.

A batch of more records, or whose rows cannot be collected
(``lakehouse.driver_append.collect_arrow``), takes the Spark path. Both paths land the same
rows (``tests/integration/silver_batch/test_batch.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property, partial

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import types as T  # noqa: N812

from codec import SchemaKey
from lakehouse.bronze_columns import INGESTED_AT, RECORD_COLUMNS
from lakehouse.driver_append import MAX_RECORDS, collect_arrow

from . import arrow_rejects
from .arrow_rows import ArrowFailures
from .decode import (
    DecodeSpec,
    decode_batches,
    decode_input,
    decoded_schema,
    message_spark_schema,
)
from .decode_pass import DecodedVersion
from .framing import FRAMED_FIELDS, FramedBatch, Heads, schema_key_of
from .plan import TablePlan
from .record_framing import frame_batch
from .rejects import quarantine_dq, quarantine_time
from .resolution import KeyCounts, Resolution
from .writes import Rejects

#: a batch of at most this many records is framed and decoded in the driver (the most the
#: driver appends with delta-rs: above, Spark would append the rows anyway)
DRIVER_RECORDS = MAX_RECORDS


def collect_small(bronze: DataFrame, limit: int) -> pa.Table | None:
    """The batch's bronze columns (and ``_ingested_at`` when it has it) as Arrow, when it has at
    most ``limit`` records and they can be collected; else None. One Spark job."""
    if limit <= 0:
        return None
    columns = [*RECORD_COLUMNS, *([INGESTED_AT] if INGESTED_AT in bronze.columns else [])]
    rows = collect_arrow(
        bronze.select(*columns).limit(limit + 1), "silver", "the batch takes the Spark path"
    )
    if rows is None or rows.num_rows > limit:
        return None
    return rows


@dataclass(frozen=True)
class SmallBatch:
    """A small batch after step 1 in the driver: its framed rows (Arrow), each one's value
    schema key, their counts per schema key, the batch's heads and bronze rows."""

    framed: pa.Table
    keys: list[SchemaKey | None]  # each framed row's value schema key
    counts: KeyCounts
    heads: Heads
    bronze: DataFrame
    framed_schema: T.StructType

    @classmethod
    def frame(cls, bronze: DataFrame, rows: pa.Table) -> SmallBatch:
        """Frame the collected ``rows`` of ``bronze``, record by record."""
        bronze_schema = bronze.select(*rows.column_names).schema
        records = rows.select(list(RECORD_COLUMNS))
        batches = records.to_batches() or [pa.RecordBatch.from_pylist([], records.schema)]
        framed = pa.Table.from_batches([frame_batch(b) for b in batches])
        framed_schema = T.StructType([*(bronze_schema[c] for c in RECORD_COLUMNS), *FRAMED_FIELDS])
        heads = Heads.all_in_python(_latest_ingested(rows))
        keys = [schema_key_of(k) for k in framed.column("_schema_key").to_pylist()]
        return cls(framed, keys, _counts(framed, keys), heads, bronze, framed_schema)

    @cached_property
    def batch(self) -> FramedBatch:
        """The framed batch, its rows as a local relation, made when a step reads them (the
        quality failures of a table checked by Spark are joined to them); nothing reads the
        bronze rows again."""
        session = self.bronze.sparkSession
        return FramedBatch(
            self.bronze,
            self.heads,
            lambda: session.createDataFrame(self.framed, schema=self.framed_schema),
        )

    def decode(self, specs: Mapping[SchemaKey, DecodeSpec]) -> dict[SchemaKey, DecodedVersion]:
        """Each version's records decoded here (``decode.decode_batches``), with their failures
        counted; their local relation (``decode.decode_records``' schema) made when read."""
        session = self.bronze.sparkSession
        out: dict[SchemaKey, DecodedVersion] = {}
        for key, spec in specs.items():  # every planned version has records in the batch
            mine = pa.array([i for i, k in enumerate(self.keys) if k == key], pa.int64())
            records = self.framed.select(list(decode_input(spec))).take(mine)
            decoded = pa.Table.from_batches(list(decode_batches(spec, records.to_batches())))
            failed = decoded.num_rows - decoded.column("_decode_code").null_count
            schema = decoded_schema(
                message_spark_schema(spec.file_descriptor_set, spec.message_type, spec.max_depth)
            )
            rows = partial(session.createDataFrame, decoded, schema=schema)
            out[key] = DecodedVersion(rows, failed, decoded)
        return out

    def rejects(
        self, bad_frames: bool, faults: list[Resolution], quarantined_at: datetime
    ) -> list[pa.Table]:
        """Step 4's quarantine rows as Arrow: the bad frames (when the counts found some),
        then the records of failed resolutions."""
        out = [arrow_rejects.bad_frames(self.framed, quarantined_at)] if bad_frames else []
        if faults:
            out.append(arrow_rejects.faults(self.framed, self.keys, faults, quarantined_at))
        return out

    def conflicts(self, plan: TablePlan, quarantined_at: datetime) -> list[pa.Table]:
        """The records of ``plan``'s conflicting versions, as Arrow quarantine rows."""
        return arrow_rejects.conflicts(self.framed, self.keys, plan, quarantined_at)

    def decode_failures(
        self, decoded: DecodedVersion, res: Resolution, message_type: str, quarantined_at: datetime
    ) -> pa.Table:
        """The records of one version that did not decode, as Arrow quarantine rows."""
        assert decoded.arrow is not None  # decoded here (decode)
        return arrow_rejects.decode_failures(decoded.arrow, res, message_type, quarantined_at)

    def quality_failures(
        self,
        failed: ArrowFailures | DataFrame,
        plan: TablePlan,
        quarantined_at: datetime,
        rows: int | None,
    ) -> Rejects:
        """The rows of ``plan``'s table a quality rule rejected, with their raw bytes: as Arrow
        quarantine rows when checked here (``ArrowFailures``: a mask of the table's rows),
        else (checked by Spark) joined to the framed rows' local relation, ``rows`` of them
        when known."""
        if isinstance(failed, ArrowFailures):
            return arrow_rejects.quality_failures(
                self.framed, failed.rows, failed.failed, failed.reasons, plan, quarantined_at
            )
        q_time = quarantine_time(quarantined_at)
        return quarantine_dq(failed, self.batch.framed, plan, q_time, rows)


def _counts(framed: pa.Table, keys: list[SchemaKey | None]) -> KeyCounts:
    """Records per (value schema key, key schema key) and each value key's topics."""
    counts: Counter[tuple[SchemaKey | None, SchemaKey | None]] = Counter()
    topics: dict[SchemaKey, set[str]] = {}
    for value_key, key_key, topic in zip(
        keys,
        framed.column("_key_schema_key").to_pylist(),
        framed.column("topic").to_pylist(),
        strict=True,
    ):
        pair = (value_key, schema_key_of(key_key))
        counts[pair] += 1
        if pair[0] is not None and topic:
            topics.setdefault(pair[0], set()).add(topic)
    return KeyCounts(dict(counts), topics)


def _latest_ingested(rows: pa.Table) -> datetime | None:
    """The latest ``_ingested_at`` of the rows (None: no such column, or only nulls)."""
    if INGESTED_AT not in rows.column_names:
        return None
    return pc.max(rows.column(INGESTED_AT)).as_py()
