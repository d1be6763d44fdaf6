"""Small appends without a Spark write: a micro-batch's rows collected as Arrow and committed by
delta-rs (``deltalake``) in the driver.

A Spark append of a few hundred rows is mostly fixed cost: planning the write, its job, and
Delta's commit through the JVM. Collected as Arrow (one job that reads what is already
computed) and committed by delta-rs, the same append costs a fraction of it:
``bench/driver_append_bench.py`` measures both on the same table. The commit is the one
:func:`lakehouse.delta.append_idempotent` makes, through the same lookup and retries
(:func:`lakehouse.delta.commit_once`): the batch's marker in ``userMetadata``, Delta's
transaction ids (``txn``) on a batch that may be a replay, and the table's own partitioning.
Spark, delta-rs and every reader share one Delta log.

An append goes this way only when all of these hold (:func:`appends_in_driver`, then
:func:`append_arrow`), else the caller appends with Spark as before:

- the table is in a local folder (a plain path or ``file:`` URI: :func:`lakehouse.layout.
  local_path`): on an object store Spark's file systems and log stores keep the commits;
- the batch is small (at most :data:`MAX_RECORDS` records), so that its rows fit the driver;
- the table exists (``lakehouse.driver_tables`` creates a local one), and the rows have
  its columns and types, in any order (:func:`in_table_order`); or, asked with
  ``merge_schema``, the rows add columns or struct fields to the table's, as Spark's
  ``mergeSchema`` would (:func:`adding_columns`: silver's schema evolution), which delta-rs
  merges the same way: the new ones after the table's, their comments from the rows' field
  metadata; any other change of the schema stays Spark's;
- the rows can be collected (:func:`collect_arrow`: not more bytes than the driver takes) and
  delta-rs writes the table (no table feature it refuses; once it refused one, the process
  leaves that table to Spark).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lakehouse.delta import (
    ANY_BATCH_MAY_BE_REPLAYED,
    APPEND_ATTEMPTS,
    Replays,
    batch_marker,
    commit_once,
    is_delta_conflict,
)
from lakehouse.driver_tables import has_plain_protocol
from lakehouse.layout import local_path, location_key

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

#: a batch of more records is appended by Spark (its rows would have to fit the driver)
MAX_RECORDS = 50_000


#: tables whose protocol needs a writer feature delta-rs lacks, by location key: Spark appends
#: to them from the first refusal on (a table's features are not dropped while it is written)
_SPARK_ONLY: set[str] = set()


def appends_in_driver(path: str, records: int) -> bool:
    """Whether a batch of ``records`` records to the table at ``path`` may be appended by
    :func:`append_arrow` (a local table, a small batch, not one delta-rs refused for its
    features in this process)."""
    return (
        records <= MAX_RECORDS
        and local_path(path) is not None
        and location_key(path) not in _SPARK_ONLY
    )


def collect_arrow(df: DataFrame, what: str, instead: str = "Spark appends them") -> pa.Table | None:
    """``df``'s rows in the driver as Arrow, or None when they could not be collected (more
    bytes than the driver takes: ``spark.driver.maxResultSize``; logged with what the caller
    does ``instead``): the caller then goes the Spark way, which meets any error of the rows
    themselves again."""
    try:
        return df.toArrow()
    except Exception as exc:  # noqa: BLE001 - Spark's path is the answer to any failure here
        log.warning(
            "%s: a batch's rows could not be collected (%s); %s",
            what,
            str(exc).splitlines()[0][:300],
            instead,
        )
        return None


def has_table(path: str) -> bool:
    """Whether the local ``path`` holds a Delta table (its log read, not its state)."""
    from deltalake import DeltaTable

    local = local_path(path)
    return local is not None and bool(DeltaTable.is_deltatable(str(local)))


def existing_table(path: str) -> Any:
    """The delta-rs table at local ``path``, or None when there is no Delta table there."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    local = local_path(path)
    if local is None:
        return None
    try:
        return DeltaTable(str(local))
    except TableNotFoundError:
        return None


def in_table_order(data: pa.Table, table: Any) -> pa.Table | None:
    """``data`` with the columns of delta-rs table ``table`` in the table's order, when it has
    exactly those columns with the table's types (nullability and string layouts aside); None
    otherwise. Spark's ``mergeSchema`` adds a new column at the end of the table, where a
    batch's rows may hold it elsewhere: the same columns in another order still fit."""
    import pyarrow as pa

    wanted = pa.schema(table.schema().to_arrow())
    if sorted(data.schema.names) != sorted(wanted.names) or len(set(wanted.names)) != len(wanted):
        return None
    ordered = data.select(wanted.names)
    if all(_same_type(h.type, w.type) for h, w in zip(ordered.schema, wanted, strict=True)):
        return ordered
    return None


def adding_columns(data: pa.Table, table: Any) -> pa.Table | None:
    """``data`` with the columns of delta-rs table ``table`` first, in the table's order, then
    its new ones, when it only adds to the table's schema: every column of the table, of the
    table's type or a struct of the table's fields first (by name, in the table's order, of
    their types or extended alike) and new fields after them; None otherwise, and for a table
    of table features (``driver_tables.has_plain_protocol``: delta-rs would add features of
    its own, and cannot evolve a column-mapped schema). The new columns and fields are
    nullable, the table's keep its nullability, as Spark's ``mergeSchema`` leaves them."""
    import pyarrow as pa

    if not has_plain_protocol(table):
        return None
    wanted = pa.schema(table.schema().to_arrow())
    names = data.schema.names
    if len(set(names)) != len(names) or not set(wanted.names) <= set(names):
        return None
    if not all(_extends(data.schema.field(w.name).type, w.type) for w in wanted):
        return None
    ordered = data.select([*wanted.names, *(n for n in names if n not in set(wanted.names))])
    own = {f.name: f for f in wanted}
    return ordered.cast(pa.schema([_merged_field(f, own.get(f.name)) for f in ordered.schema]))


def _merged_field(field: pa.Field, table_field: pa.Field | None) -> pa.Field:
    """``field`` as the merge should take it into ``table_field`` (None: a new column or
    field): new ones nullable at every depth (Spark's ``asNullable``), the table's own with
    the table's nullability (delta-rs merges nullability with an or)."""
    import pyarrow as pa

    if table_field is None:
        return _nullable(field)
    have, want = field.type, table_field.type
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        own = {want.field(i).name: want.field(i) for i in range(want.num_fields)}
        children = [have.field(i) for i in range(have.num_fields)]
        have = pa.struct([_merged_field(c, own.get(c.name)) for c in children])
    elif pa.types.is_list(have) and _is_list(want):
        have = pa.list_(_merged_field(have.value_field, want.value_field))
    elif pa.types.is_large_list(have) and _is_list(want):
        have = pa.large_list(_merged_field(have.value_field, want.value_field))
    elif pa.types.is_map(have) and pa.types.is_map(want):
        have = pa.map_(have.key_field, _merged_field(have.item_field, want.item_field))
    return field.with_type(have).with_nullable(table_field.nullable)


def _nullable(field: pa.Field) -> pa.Field:
    """``field`` nullable, and so are its struct fields, list elements and map values."""
    import pyarrow as pa

    t = field.type
    if pa.types.is_struct(t):
        t = pa.struct([_nullable(t.field(i)) for i in range(t.num_fields)])
    elif pa.types.is_list(t):
        t = pa.list_(_nullable(t.value_field))
    elif pa.types.is_large_list(t):
        t = pa.large_list(_nullable(t.value_field))
    elif pa.types.is_map(t):
        t = pa.map_(t.key_field, _nullable(t.item_field))
    return field.with_type(t).with_nullable(True)


def _extends(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether ``have`` is ``want`` (as :func:`_same_type`) or adds struct fields after its
    own, at any depth."""
    import pyarrow as pa

    if _same_type(have, want):
        return True
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        own = [have.field(i) for i in range(have.num_fields)][: want.num_fields]
        return [f.name for f in own] == [f.name for f in want] and all(
            _extends(h.type, w.type) for h, w in zip(own, want, strict=True)
        )
    if _is_list(have) and _is_list(want):
        return _extends(have.value_type, want.value_type)
    if pa.types.is_map(have) and pa.types.is_map(want):
        return _same_type(have.key_type, want.key_type) and _extends(have.item_type, want.item_type)
    return False


def _same_type(have: pa.DataType, want: pa.DataType) -> bool:
    import pyarrow as pa

    if have.equals(want):
        return True
    # delta-rs reads its schema back with large or view string and binary types
    normal = {pa.large_string(): pa.string(), pa.string_view(): pa.string()}
    normal |= {pa.large_binary(): pa.binary(), pa.binary_view(): pa.binary()}
    if normal.get(have, have).equals(normal.get(want, want)):
        return True
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        return [f.name for f in have] == [f.name for f in want] and all(
            _same_type(h.type, w.type) for h, w in zip(have, want, strict=True)
        )
    if _is_list(have) and _is_list(want):
        return _same_type(have.value_type, want.value_type)
    if pa.types.is_map(have) and pa.types.is_map(want):
        return _same_type(have.key_type, want.key_type) and _same_type(
            have.item_type, want.item_type
        )
    return False


def _is_list(t: pa.DataType) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t))


def append_arrow(
    spark: SparkSession,
    data: pa.Table,
    path: str,
    app_id: str,
    batch_id: int,
    *,
    replays: Replays = ANY_BATCH_MAY_BE_REPLAYED,
    attempts: int = APPEND_ATTEMPTS,
    logger: logging.Logger | None = None,
    merge_schema: bool = False,
) -> bool:
    """Append ``data`` to the local Delta table at ``path`` with delta-rs, unless it already
    has (app_id, batch_id), as :func:`lakehouse.delta.append_idempotent` would; with
    ``merge_schema``, rows that add columns or struct fields merge them into the table's
    schema (:func:`adding_columns`).

    Returns:
        False, with nothing written, when there is no Delta table at ``path``, ``data`` does
        not fit its schema (:func:`in_table_order` or :func:`adding_columns`, also after a
        concurrent writer's change) or delta-rs refuses the table (a table feature it cannot
        write): the caller appends with Spark (which creates the table or merges the
        schema). True otherwise, also when the table had the batch already.
    """
    from deltalake import CommitProperties, Transaction, write_deltalake
    from deltalake.exceptions import DeltaError, DeltaProtocolError, SchemaMismatchError

    def fit(table: Any) -> tuple[pa.Table | None, bool]:
        rows = in_table_order(data, table)
        if rows is not None or not merge_schema:
            return rows, False
        return adding_columns(data, table), True

    table = existing_table(path)
    rows, merging = (None, False) if table is None else fit(table)
    if rows is None:
        return False
    refused = False

    def write(checked: bool) -> None:
        nonlocal refused, rows, merging
        table.update_incremental()  # a retry commits against the newer version
        rows, merging = fit(table)  # another writer may have changed the schema
        if rows is None:
            refused = True
            return
        before = table.version()
        landed = table.transaction_version(app_id) if checked else None
        if landed is not None and landed >= batch_id:
            return  # a checked commit that landed before its error: Delta's ids say so
        # delta-rs retries a commit that lost a race (its file was never written) itself
        properties = CommitProperties(
            custom_metadata={"userMetadata": batch_marker(app_id, batch_id)},
            app_transactions=[Transaction(app_id, batch_id)] if checked else None,
        )
        try:
            write_deltalake(
                table,
                rows,
                mode="append",
                schema_mode="merge" if merging else None,
                commit_properties=properties,
            )
        except (SchemaMismatchError, DeltaProtocolError) as exc:
            # refused before any commit: a schema or a table feature delta-rs cannot write
            (logger or log).info("%s: delta-rs refused the append (%s); Spark appends", path, exc)
            refused = True
        except DeltaError as exc:
            if _unsupported_features(exc):  # refused before any commit, not a race
                (logger or log).info("%s: delta-rs cannot write it (%s); Spark appends", path, exc)
                _SPARK_ONLY.add(location_key(path))
                refused = True
                return
            marker = batch_marker(app_id, batch_id)
            if not merging or is_delta_conflict(exc) or _landed_since(table, before, marker):
                raise
            # a schema change delta-rs cannot make, refused before any commit
            (logger or log).info("%s: delta-rs refused the merge (%s); Spark appends", path, exc)
            refused = True

    commit_once(spark, path, app_id, batch_id, write, replays, attempts, logger)
    return not refused


def _unsupported_features(exc: Exception) -> bool:
    """Whether delta-rs refused a table whose protocol needs a feature it does not have (row
    tracking, domain metadata, clustering, ...): a ``CommitFailedError``, otherwise a race
    ("Unsupported table features required: [...]", or "writer features" in older wordings)."""
    text = str(exc)
    return "Unsupported" in text and "features" in text


def _landed_since(table: Any, version: int, marker: str) -> bool:
    """Whether a commit of delta-rs table ``table`` after ``version`` (read again) carries
    the batch ``marker``: a failed write whose commit landed is not a refusal."""
    table.update_incremental()
    since = table.version() - version
    return since > 0 and any(c.get("userMetadata") == marker for c in table.history(since))
