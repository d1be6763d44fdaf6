"""Delta versions and row counts of the lakehouse's tables, read with ``deltalake`` (delta-rs):
no Spark, no JVM, in the Airflow worker.

Tables are named by folder (a :class:`lakehouse.layout.Layout` path: a local folder or an
``s3a://`` URI) and read through the lakehouse's :class:`lakehouse.store.Store`
(:func:`.environment.open_lakehouse`): ``deltalake`` reads their logs with its
``storage_options``, pyarrow lists their folders. Row counts come from the per-file ``numRecords`` statistics of the latest snapshot
(less the rows deletion vectors remove); data files are read only to test a column's values.
A folder that is not a Delta table has no version and no count (None), as has a table with a
file written without statistics (a count would need a scan of every file).

``deltalake`` and ``pyarrow`` are imported inside the functions (the DAG files never import
this module at parse time).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from protolake_support.environment import load_job_config, open_lakehouse

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from lakehouse.layout import Layout
    from lakehouse.store import Store


def open_table(table: str, store: Store) -> DeltaTable | None:
    """The latest snapshot of the Delta table in ``table`` (None: not a Delta table)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(table, storage_options=dict(store.storage_options))
    except TableNotFoundError:
        return None


def delta_version(table: str, store: Store) -> int | None:
    """The latest committed version of a Delta table (None: not a Delta table)."""
    snapshot = open_table(table, store)
    return None if snapshot is None else snapshot.version()


def delta_tables(folder: str, store: Store) -> dict[str, str]:
    """Delta tables directly under ``folder``, by name (:func:`lakehouse.delta.list_delta_tables`)."""
    from lakehouse.delta import list_delta_tables
    from lakehouse.layout import table_name

    return {table_name(p): p for p in list_delta_tables(folder, store=store)}


def silver_versions(config: str) -> dict[str, int]:
    """``{silver table: latest Delta version}`` of the configured lakehouse
    (:func:`lakehouse.delta.silver_versions`, by table name)."""
    from lakehouse import delta
    from lakehouse.layout import table_name

    lakehouse = open_lakehouse(load_job_config(config))
    if lakehouse is None:
        return {}
    layout, store = lakehouse
    return {table_name(p): v for p, v in delta.silver_versions(layout, store=store).items()}


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


def lakehouse_counts(config: str) -> dict[str, dict[str, int | None]]:
    """:func:`layout_counts` of the configured lakehouse (empty: on a file system the DAGs
    cannot read)."""
    lakehouse = open_lakehouse(load_job_config(config))
    return {} if lakehouse is None else layout_counts(*lakehouse)


def layout_counts(layout: Layout, store: Store) -> dict[str, dict[str, int | None]]:
    """Rows per table of bronze and silver, and records still quarantined, from the Delta logs
    of a lakehouse read through ``store``.

    Quarantine counts as ``protolake status`` and the invariant do: a row replayed into silver
    stays in the quarantine table (its raw bytes are kept) but is counted in silver only
    (``pipelines.quarantine_state``).
    """
    from lakehouse.layout import BRONZE, QUARANTINE, SILVER
    from pipelines.quarantine_state import OUTCOME_COLUMN, counts_as_quarantined

    counts = {
        layer: {
            name: delta_row_count(path, store)
            for name, path in delta_tables(layout.layer(layer), store).items()
        }
        for layer in (BRONZE, SILVER)
    }
    counts[QUARANTINE] = {
        name: delta_row_count(path, store, where=(OUTCOME_COLUMN, counts_as_quarantined))
        for name, path in delta_tables(layout.layer(QUARANTINE), store).items()
    }
    return counts


def format_counts(counts: Mapping[str, Mapping[str, int | None]]) -> str:
    """The counts as a small text table, with totals and the bronze = silver + quarantine sum
    (quarantine: the records still quarantined, see :func:`layout_counts`)."""
    lines = []
    totals: dict[str, int] = {}
    for layer, tables in counts.items():
        total = 0
        for name, n in tables.items():
            lines.append(f"{layer:<10} {name:<50} {'?' if n is None else n:>10}")
            total += n or 0
        totals[layer] = total
        lines.append(f"{layer:<10} {'(total)':<50} {total:>10}")
    b, s, q = (totals.get(k, 0) for k in ("bronze", "silver", "quarantine"))
    verdict = "matches" if b == s + q else "DIFFERS (bronze != silver + quarantine)"
    lines.append(f"bronze {b} vs silver {s} + quarantine {q}: {verdict}")
    return "\n".join(lines)
