"""Step 3 of a silver micro-batch: plan each table's schema from the resolved versions.

The resolved schema keys of a batch are grouped by message type (one silver table each). A
table's message columns start from the schema it has (``known``: as the driver's queries last
wrote it, ``written_schemas``, else read from the Delta log; none for a new table); the versions are then merged in schema
order (``schemas_compatible``): a version that cannot be merged is a conflict, its records go
to quarantine with ``SCHEMA_CONFLICT`` and the table is left as it was (see ``tables``). So is
a version with a top-level field named like a column silver adds beside the message's
(:data:`RESERVED_NAMES`, compared as Spark compares names: ignoring case).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import types as T  # noqa: N812

from lakehouse.sql_text import column, literal
from pipelines.naming import table_name_for

from .decode import ERROR_COLUMNS, LINEAGE_DECODE_FIELDS, message_spark_schema
from .resolution import Resolution
from .tables import LINEAGE_FIELDS, align_to

#: names (lower case) of the columns silver puts beside a message's own while decoding it and
#: in its table: a message field of one of these names would meet its namesake
RESERVED_NAMES = frozenset(
    n.lower()
    for n in (*(f.name for f in (*LINEAGE_FIELDS, *LINEAGE_DECODE_FIELDS)), *ERROR_COLUMNS)
)
#: the prefix of the flag columns quality adds while checking a batch
RESERVED_PREFIX = "__dq_"


@dataclass
class TablePlan:
    """What a batch writes to one silver table: the versions it merges and the conflicts."""

    message_type: str
    table: str
    path: str
    merged: T.StructType | None  # message columns of the table after this batch
    versions: list[Resolution]
    conflicts: list[tuple[Resolution, str]]
    # what the driver's cache of the table's columns was when planned (``written_schemas``)
    stamp: int = -1  # -1: none read (what the plan wrote is then not kept)


def plan_tables(
    resolutions: Iterable[Resolution],
    path_of: Callable[[str], str],
    known: Callable[[str], T.StructType | None],
    max_depth: int,
) -> list[TablePlan]:
    """One plan per message type of the successful resolutions, in message type order.

    Args:
        resolutions: the batch's resolutions (faults are skipped: they are quarantined).
        path_of: the table path of a table name.
        known: the message columns a table path has now, or None (no table yet).
        max_depth: recursion depth of message columns.
    """
    by_type: dict[str, list[Resolution]] = defaultdict(list)
    for r in resolutions:
        if r.ok and r.message_type is not None:
            by_type[r.message_type].append(r)
    plans = []
    for message_type in sorted(by_type):
        table = table_name_for(message_type)
        path = path_of(table)
        plans.append(
            plan_table(message_type, table, path, known(path), by_type[message_type], max_depth)
        )
    return plans


def plan_table(
    message_type: str,
    table: str,
    path: str,
    current: T.StructType | None,
    versions: list[Resolution],
    max_depth: int,
) -> TablePlan:
    """Merge ``versions`` (in schema order) into the table's ``current`` message columns."""
    from pipelines.proto_types import schemas_compatible

    plan = TablePlan(message_type, table, path, current, [], [])
    for res in sorted(versions, key=_version_order):
        assert res.file_descriptor_set is not None
        schema = message_spark_schema(res.file_descriptor_set, message_type, max_depth)
        clash = reserved_fields(schema)
        if clash:
            names = ", ".join(clash)
            plan.conflicts.append(
                (
                    res,
                    f"schema {res.version} of {message_type} has fields named as silver's "
                    f"own columns ({names}): rename them",
                )
            )
            continue
        if plan.merged is None:
            plan.merged = schema
            plan.versions.append(res)
            continue
        new, reason = schemas_compatible(plan.merged, schema)
        if new is None:
            plan.conflicts.append(
                (
                    res,
                    f"schema {res.version} of {message_type} cannot be merged into {table}: {reason}",
                )
            )
        else:
            plan.merged = new
            plan.versions.append(res)
    return plan


def reserved_fields(message: T.StructType) -> list[str]:
    """The message's top-level columns named as silver's own (:data:`RESERVED_NAMES`)."""
    return [
        f.name
        for f in message.fields
        if f.name.lower() in RESERVED_NAMES or f.name.lower().startswith(RESERVED_PREFIX)
    ]


def table_schema(message: T.StructType) -> T.StructType:
    """A silver table's schema: the message columns, then the lineage columns."""
    return T.StructType([*message.fields, *LINEAGE_FIELDS])


def table_rows(decoded: DataFrame, res: Resolution, plan: TablePlan, q_time: Column) -> DataFrame:
    """The decoded rows of one version with their lineage, aligned to the table's schema."""
    assert plan.merged is not None
    lineage = {  # as SQL text: a parse each (lakehouse.sql_text)
        "_schema_id": column(f"CAST({literal(res.schema_id)} AS BIGINT)"),
        "_schema_guid": column(f"CAST({literal(res.schema_guid)} AS STRING)"),
        "_message_type": column(literal(plan.message_type)),
        "_processed_at": q_time,
    }
    rows = decoded.where("`_decode_code` IS NULL").drop(*ERROR_COLUMNS).withColumns(lineage)
    return align_to(rows, table_schema(plan.merged))


def _version_order(res: Resolution) -> tuple[int, int, str]:
    if res.schema_id is not None:
        return (0, res.schema_id, "")
    return (1, 0, res.schema_guid or "")
