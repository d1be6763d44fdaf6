"""Delta versions and row counts of the lakehouse's tables, read with ``deltalake`` (delta-rs):
no Spark, no JVM, in the Airflow worker.

Tables are named by folder (a :class:`lakehouse.layout.Layout` path: a local folder or an
``s3a://`` URI) and read through the lakehouse's :class:`lakehouse.store.Store`
(:func:`.environment.open_lakehouse`): ``deltalake`` reads their logs with its
``storage_options``, pyarrow lists their folders. Row counts are
:func:`lakehouse.row_counts.delta_row_count`'s, from the Delta log's statistics. A folder that
is not a Delta table has no version and no count (None).

``deltalake`` and ``pyarrow`` are imported inside the functions (the DAG files never import
this module at parse time).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from lakehouse.row_counts import delta_row_count, open_table
from protolake_support.environment import load_job_config, open_lakehouse

if TYPE_CHECKING:
    from lakehouse.layout import Layout
    from lakehouse.store import Store


def delta_version(table: str, store: Store) -> int | None:
    """The latest committed version of a Delta table (None: not a Delta table)."""
    snapshot = open_table(table, store)
    return None if snapshot is None else snapshot.version()


def delta_tables(folder: str, store: Store) -> dict[str, str]:
    """Delta tables directly under ``folder``, by name (:func:`lakehouse.tables.list_delta_tables`)."""
    from lakehouse.layout import table_name
    from lakehouse.tables import list_delta_tables

    return {table_name(p): p for p in list_delta_tables(folder, store=store)}


def silver_versions(config: str) -> dict[str, int]:
    """``{silver table: latest Delta version}`` of the configured lakehouse
    (:func:`lakehouse.tables.silver_versions`, by table name)."""
    from lakehouse import tables
    from lakehouse.layout import table_name

    lakehouse = open_lakehouse(load_job_config(config))
    if lakehouse is None:
        return {}
    layout, store = lakehouse
    return {table_name(p): v for p, v in tables.silver_versions(layout, store=store).items()}


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
