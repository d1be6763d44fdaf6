"""Row counts of Delta tables read from their logs with ``deltalake`` (delta-rs): no Spark, no
JVM. The Airflow worker's counts (``dags/protolake_support/tables.py``) and the demo's report
use them.

Tables are named by folder (a :class:`lakehouse.layout.Layout` path: a local folder or an
``s3a://`` URI) and read with the ``storage_options`` of a :class:`lakehouse.store.Store`. Row
counts come from the per-file ``numRecords`` statistics of the latest snapshot (less the rows
deletion vectors remove); data files are read only to test a column's values. A folder that
is not a Delta table has no count (None), as has a table with a file written without
statistics (a count would need a scan of every file).

``deltalake`` and ``pyarrow`` are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from lakehouse.store import Store


def open_table(table: str, store: Store) -> DeltaTable | None:
    """The latest snapshot of the Delta table in ``table`` (None: not a Delta table)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(table, storage_options=dict(store.storage_options))
    except TableNotFoundError:
        return None


def delta_row_count(
    table: str, store: Store, where: tuple[str, Callable[[Any], bool]] | None = None
) -> int | None:
    """Rows in the latest snapshot, from the ``numRecords`` statistics of the Delta log.

    With ``where = (column, keep)``, only the rows whose ``column`` value ``keep`` accepts:
    the non-null values are read (files whose statistics say the column is null throughout
    are skipped) and tested one by one; the null rows (all rows less the non-null ones) count
    ``keep(None)`` each. None when the table is not a Delta table, when a live file has no
    statistics, or, with ``where``, when the table has no such column.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    snapshot = open_table(table, store)
    if snapshot is None:
        return None
    records = pa.table(snapshot.get_add_actions(flatten=True)).column("num_records")
    if records.null_count:
        return None
    live = int(pc.sum(records).as_py() or 0) - _deleted_rows(snapshot)
    if where is None:
        return live
    column, keep = where
    values = _non_null_values(snapshot, column)
    if values is None:
        return None
    kept = sum(1 for value in values if keep(value))
    return kept + (live - len(values) if keep(None) else 0)


def _deleted_rows(snapshot: DeltaTable) -> int:
    """Rows the snapshot's deletion vectors remove from its files' ``numRecords``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "deletionVectors" not in (snapshot.protocol().reader_features or []):
        return 0
    vectors = pa.RecordBatchReader.from_stream(snapshot.deletion_vectors()).read_all()
    keep = pc.list_flatten(vectors.column("selection_vector"))
    return len(keep) - int(pc.sum(keep).as_py() or 0)


def _non_null_values(snapshot: DeltaTable, column: str) -> list[Any] | None:
    """The non-null values of one column of the snapshot (None: no such column)."""
    import pyarrow as pa

    if column not in {field.name for field in snapshot.schema().fields}:
        return None
    # the predicate lets delta-rs skip the files whose statistics say the column is all null
    name = column.replace('"', '""')
    reader = snapshot.scan(columns=[column], predicate=f'"{name}" IS NOT NULL')
    return list(pa.RecordBatchReader.from_stream(reader).read_all().column(column).to_pylist())
