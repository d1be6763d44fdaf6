"""The quarantine rows of a small batch as Arrow (the driver path, ``driver_pass``): the
builders of ``rejects`` over the rows the driver holds, without a Spark job.

Each builder picks rows of the framed batch (bad frames, failed resolutions, schema conflicts,
quality failures by their Kafka coordinates) or of a version's decoded rows (decode failures)
and projects them onto the quarantine table's columns (:data:`QUARANTINE_ARROW`), with the
values ``rejects`` gives them: the same raw bytes, reason codes, stages and reasons, schema
columns and ``_quarantined_at``. ``tests/integration/silver_batch/test_batch.py`` holds the two
paths' quarantine rows equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_type

from codec import SchemaKey
from pipelines.quarantine import QUARANTINE_SCHEMA

from .plan import TablePlan
from .rejects import SCHEMA_CONFLICT
from .resolution import Resolution

#: the quarantine table's columns as Arrow
QUARANTINE_ARROW = pa.schema(
    [pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC")) for f in QUARANTINE_SCHEMA]
)


@dataclass(frozen=True)
class Constant:
    """The one value of a quarantine column for every picked row."""

    value: object


#: a quarantine column's values: a column of the picked rows (its name), one value for every
#: row (:class:`Constant`) or one value per picked row
Values: TypeAlias = str | Constant | Sequence[object] | pa.Array


def _coded(rows: pa.Table, column: str) -> pa.Array:
    """The indices of the rows of ``rows`` whose ``column`` is not null (a failure code)."""
    return pc.indices_nonzero(pc.is_valid(rows.column(column)))


def project(
    rows: pa.Table, picked: pa.Array, quarantined_at: datetime, **values: Values
) -> pa.Table:
    """The ``picked`` rows (indices) of ``rows`` as quarantine rows: each column of
    :data:`QUARANTINE_ARROW` from ``values`` (missing: null), ``_quarantined_at``
    ``quarantined_at``."""
    mine = rows.take(picked)
    n = mine.num_rows
    values = {**values, "_quarantined_at": Constant(quarantined_at)}
    columns = []
    for field in QUARANTINE_ARROW:
        value = values.get(field.name)
        if value is None:
            columns.append(pa.nulls(n, field.type))
        elif isinstance(value, str):
            columns.append(mine.column(value).cast(field.type))
        elif isinstance(value, Constant):
            columns.append(pa.array([value.value] * n, field.type))
        else:
            columns.append(pa.array(value, field.type))
    return pa.Table.from_arrays(columns, schema=QUARANTINE_ARROW)


def _framed(
    rows: pa.Table, picked: pa.Array, quarantined_at: datetime, **values: Values
) -> pa.Table:
    """:func:`project` of framed rows (``rejects.quarantine_framed``'s columns)."""
    return project(
        rows,
        picked,
        quarantined_at,
        key="key",
        value="value",
        headers="headers",
        _kafka_topic="topic",
        _kafka_partition="partition",
        _kafka_offset="offset",
        _kafka_timestamp="timestamp",
        _schema_id="_schema_id",
        _schema_guid="_schema_guid",
        message_indexes="_message_indexes",
        **values,
    )


def bad_frames(framed: pa.Table, quarantined_at: datetime) -> pa.Table:
    """Records whose value could not be framed (``rejects.quarantine_bad_frames``)."""
    return _framed(
        framed,
        _coded(framed, "_frame_code"),
        quarantined_at,
        reason_code="_frame_code",
        stage="_frame_stage",
        reason="_frame_reason",
    )


def faults(
    framed: pa.Table,
    keys: Sequence[SchemaKey | None],
    failed: list[Resolution],
    quarantined_at: datetime,
) -> pa.Table:
    """Records whose schema key did not resolve (``rejects.quarantine_faults``)."""
    by_key = {r.schema_key: r for r in failed}
    picked = [i for i, k in enumerate(keys) if k in by_key]
    of = [by_key[keys[i]] for i in picked]  # type: ignore[index]
    return _framed(
        framed,
        pa.array(picked, pa.int64()),
        quarantined_at,
        reason_code=[r.code for r in of],
        stage=[r.stage for r in of],
        reason=[r.reason for r in of],
    )


def conflicts(
    framed: pa.Table, keys: Sequence[SchemaKey | None], plan: TablePlan, quarantined_at: datetime
) -> list[pa.Table]:
    """Records of the versions that could not be merged into the table
    (``rejects.quarantine_conflicts``)."""
    out = []
    for res, reason in plan.conflicts:
        picked = pa.array([i for i, k in enumerate(keys) if k == res.schema_key], pa.int64())
        out.append(
            _framed(
                framed,
                picked,
                quarantined_at,
                reason_code=Constant(SCHEMA_CONFLICT),
                stage=Constant("schema"),
                reason=Constant(reason),
                _message_type=Constant(plan.message_type),
            )
        )
    return out


def decode_failures(
    decoded: pa.Table, res: Resolution, message_type: str, quarantined_at: datetime
) -> pa.Table:
    """Decoded rows of one schema version that failed (``rejects.quarantine_decode_failures``)."""
    return project(
        decoded,
        _coded(decoded, "_decode_code"),
        quarantined_at,
        key="_key",
        value="_value",
        headers="_headers",
        _kafka_topic="_kafka_topic",
        _kafka_partition="_kafka_partition",
        _kafka_offset="_kafka_offset",
        _kafka_timestamp="_kafka_timestamp",
        reason_code="_decode_code",
        stage="_decode_stage",
        reason="_decode_reason",
        _schema_id=Constant(res.schema_id),
        _schema_guid=Constant(res.schema_guid),
        message_indexes=Constant(list(res.message_indexes)),
        _message_type=Constant(message_type),
    )


def quality_failures(
    framed: pa.Table,
    rows: pa.Table,
    failed: pa.Array,
    reasons: list[str],
    plan: TablePlan,
    quarantined_at: datetime,
) -> pa.Table:
    """Rows a quality rule rejected (``failed``: a mask of ``rows``, ``reasons`` one per
    failed row), with their raw bytes from the framed batch (``rejects.quarantine_dq``)."""
    from quality.split import REASON_CODE, STAGE

    mine = rows.filter(failed)
    at = {
        coordinates: i
        for i, coordinates in enumerate(
            zip(
                framed.column("topic").to_pylist(),
                framed.column("partition").to_pylist(),
                framed.column("offset").to_pylist(),
                strict=True,
            )
        )
    }
    wanted = zip(
        mine.column("_kafka_topic").to_pylist(),
        mine.column("_kafka_partition").to_pylist(),
        mine.column("_kafka_offset").to_pylist(),
        strict=True,
    )
    picked, why = [], []
    for coordinates, reason in zip(wanted, reasons, strict=True):
        if coordinates in at:  # always: a silver row comes from a framed record (an inner join)
            picked.append(at[coordinates])
            why.append(reason)
    return _framed(
        framed,
        pa.array(picked, pa.int64()),
        quarantined_at,
        reason_code=Constant(REASON_CODE),
        stage=Constant(STAGE),
        reason=why,
        _message_type=Constant(plan.message_type),
    )
