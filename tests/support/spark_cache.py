"""The RDDs a Spark session keeps persisted, to check that a job frees what it kept."""

from __future__ import annotations

from typing import Any


def persistent_rdds(spark: Any) -> set[str]:
    """``"id: name"`` of each RDD the session keeps persisted, Delta's own cache of each table's
    state aside (Delta keeps it for as long as it uses the table)."""
    rdds = spark.sparkContext._jsc.getPersistentRDDs()
    names = (f"{i}: {rdds.get(i).name()}" for i in rdds.keySet())
    return {name for name in names if "Delta Table State" not in name}
