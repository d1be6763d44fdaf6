"""The quarantine rows of a silver micro-batch, one builder per way a record can fail.

Each builder is a ``DataFrame -> DataFrame`` transform to the quarantine table's columns
(:func:`pipelines.quarantine.to_quarantine_rows`), stamped with the batch's ``quarantined_at``:

- bad framing and failed resolutions (reason from the framing or the resolver), and schema
  conflicts (``SCHEMA_CONFLICT``): taken from the framed batch (``framing``: the bronze rows
  and their framing columns, JVM expressions but for the few records framed in Python), which
  carries the raw bytes;
- decode failures: taken from the decoded rows of one schema version (the decode pass carries
  their raw bytes along);
- quality failures (``DQ_FAILED``): the failed rows' Kafka coordinates joined back to the framed
  batch for their raw bytes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - pyspark's usual alias
from pyspark.sql import types as T  # noqa: N812

from lakehouse.sql_text import SqlText, is_not_null, literal, renamed
from pipelines.quarantine import to_quarantine_rows

from .framing import SCHEMA_KEY_TYPE, key_matches
from .plan import TablePlan
from .resolution import Resolution

SCHEMA_CONFLICT = "SCHEMA_CONFLICT"
_FAULTS_SCHEMA = T.StructType(
    [
        T.StructField("_res_key", SCHEMA_KEY_TYPE),
        T.StructField("_res_code", T.StringType()),
        T.StructField("_res_stage", T.StringType()),
        T.StructField("_res_reason", T.StringType()),
    ]
)


def quarantine_time(processed_at: datetime) -> Column:
    """The batch's ``_processed_at`` and ``_quarantined_at``, as a column."""
    return F.lit(processed_at).cast("timestamp")


def quarantine_framed(
    df: DataFrame,
    code: Column | str,
    stage: Column | str,
    reason: Column | str,
    q_time: Column,
    message_type: Column | str | None = None,
) -> DataFrame:
    """Quarantine rows of framed records (columns of ``framing.FramedBatch.framed``)."""
    return to_quarantine_rows(
        df,
        key="key",
        value="value",
        headers="headers",
        topic="topic",
        partition="partition",
        offset="offset",
        timestamp="timestamp",
        reason_code=code,
        stage=stage,
        reason=reason,
        schema_id="_schema_id",
        schema_guid="_schema_guid",
        message_indexes="_message_indexes",
        message_type=message_type,
        quarantined_at=q_time,
    )


def quarantine_bad_frames(framed: DataFrame, q_time: Column) -> DataFrame:
    """Records whose value could not be framed (the framing's code, stage and reason)."""
    return quarantine_framed(
        framed.where(is_not_null("_frame_code")),
        "_frame_code",
        "_frame_stage",
        "_frame_reason",
        q_time,
    )


#: up to this many faults, their records are picked by literals of the plan (no join)
FAULTS_AS_LITERALS = 16


def quarantine_faults(
    framed: DataFrame,
    faults: list[Resolution],
    q_time: Column,
    as_literals: int = FAULTS_AS_LITERALS,
) -> DataFrame:
    """Records whose schema key did not resolve (the resolver's code, stage and reason).

    Up to ``as_literals`` faults, each record's fault is looked up by its key in the plan's
    literals: one projection, which Spark evaluates while planning a local relation's query
    (the driver path). More faults (a batch of unknown schema ids has one per id): the framed
    batch joined to a broadcast table of them, so that the plan keeps its size whatever their
    number."""
    if len(faults) <= as_literals:
        return _faults_by_literals(framed, faults, q_time)
    table = framed.sparkSession.createDataFrame(
        [
            ((r.schema_id, r.schema_guid, list(r.message_indexes)), r.code, r.stage, r.reason)
            for r in faults
        ],
        _FAULTS_SCHEMA,
    )
    marked = framed.join(F.broadcast(table), F.col("_schema_key") == F.col("_res_key"), "inner")
    return quarantine_framed(marked, "_res_code", "_res_stage", "_res_reason", q_time)


def _faults_by_literals(framed: DataFrame, faults: list[Resolution], q_time: Column) -> DataFrame:
    """:func:`quarantine_faults` of a few faults: each record's fault (its 1-based position)
    found by comparing its key with each fault's, its reason read from arrays of literals."""
    position = F.coalesce(
        *[
            F.when(key_matches("_schema_key", r.schema_key), F.lit(i + 1))
            for i, r in enumerate(faults)
        ]
    )
    marked = framed.withColumn("_res_at", position).where(F.col("_res_at").isNotNull())

    def of_fault(values: list[str | None]) -> Column:
        return F.element_at(F.array(*[F.lit(v).cast("string") for v in values]), F.col("_res_at"))

    return quarantine_framed(
        marked,
        of_fault([r.code for r in faults]),
        of_fault([r.stage for r in faults]),
        of_fault([r.reason for r in faults]),
        q_time,
    )


def quarantine_conflicts(framed: DataFrame, plan: TablePlan, q_time: Column) -> list[DataFrame]:
    """Records of the versions that could not be merged into the table (``SCHEMA_CONFLICT``)."""
    return [
        quarantine_framed(
            framed.where(key_matches("_schema_key", res.schema_key)),
            SqlText(literal(SCHEMA_CONFLICT)),
            SqlText(literal("schema")),
            SqlText(literal(reason)),
            q_time,
            message_type=SqlText(literal(plan.message_type)),
        )
        for res, reason in plan.conflicts
    ]


def quarantine_decode_failures(
    decoded: DataFrame, res: Resolution, message_type: str, q_time: Column
) -> DataFrame:
    """Decoded rows of one schema version that failed (``decode.decode_records``' errors)."""
    return to_quarantine_rows(
        decoded.where(is_not_null("_decode_code")),
        key="_key",
        value="_value",
        headers="_headers",
        topic="_kafka_topic",
        partition="_kafka_partition",
        offset="_kafka_offset",
        timestamp="_kafka_timestamp",
        reason_code="_decode_code",
        stage="_decode_stage",
        reason="_decode_reason",
        schema_id=SqlText(literal(res.schema_id)),
        schema_guid=SqlText(literal(res.schema_guid)),
        message_indexes=SqlText(literal(list(res.message_indexes))),
        message_type=SqlText(literal(message_type)),
        quarantined_at=q_time,
    )


# Up to this many failed rows, their coordinates are broadcast to the join with the framed batch
# (one scan of it, no shuffle of its raw bytes); above, a shuffle join.
BROADCAST_DQ_ROWS = 20_000


def quarantine_dq(
    failed: DataFrame, framed: DataFrame, plan: TablePlan, q_time: Any, rows: int | None = None
) -> DataFrame:
    """Rows a quality rule rejected, with their raw bytes from the framed batch.

    Args:
        rows: how many rows ``failed`` holds, when known: the join broadcasts them when few.
    """
    ids = failed.select(
        *renamed(
            [
                ("_kafka_topic", "topic"),
                ("_kafka_partition", "partition"),
                ("_kafka_offset", "offset"),
                ("reason_code", "_dq_code"),
                ("stage", "_dq_stage"),
                ("reason", "_dq_reason"),
            ]
        )
    )
    if rows is not None and rows <= BROADCAST_DQ_ROWS:
        ids = F.broadcast(ids)
    joined = framed.join(ids, ["topic", "partition", "offset"], "inner")
    return quarantine_framed(
        joined,
        "_dq_code",
        "_dq_stage",
        "_dq_reason",
        q_time,
        message_type=SqlText(literal(plan.message_type)),
    )
