"""What silver has still to read of a bronze table, for VACUUM: files it needs must stay.

Silver's query of a bronze table reads the table's versions in order from its checkpoint's
offset. The files of a version it has yet to read may have been compacted away since (OPTIMIZE
removes them from the table, not from storage), and VACUUM deletes removed files once their
removal is older than the retention: silver would then fail on a missing file, and only a new
checkpoint (which reads the table anew) would get it going. A removal comes after the version
that added the file, so every file silver still needs was removed after the first version it
has yet to read: when that version's commit is within the retention, so are their removals.
Versions that only rearrange files (OPTIMIZE, ``dataChange`` false) a stream does not read, so
the first unread version that adds data is the one that counts.

:func:`first_unread_commit` says when that version was committed; ``protolake maintain`` skips
a bronze table's VACUUM when it is older than the retention (a silver stream down for longer
than that, or far behind).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from lakehouse.checkpoints import newest_batch, planned_source_offset, read_text_lines
from lakehouse.hadoop import hadoop_path
from lakehouse.layout import Layout, location_key, table_name
from lakehouse.tables import table_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def first_unread_version(spark: SparkSession, layout: Layout, bronze_table: str) -> int | None:
    """The first version of ``bronze_table`` silver's query has yet to read, or None: no
    query yet (its first batch reads the table as it then is), or an offset not in Delta's
    form (then VACUUM cannot be judged: the caller treats it as unread from the start)."""
    checkpoint = layout.checkpoint("silver", table_name(bronze_table))
    committed = newest_batch(spark, Layout.commit_log(checkpoint))
    planned = newest_batch(spark, Layout.offset_log(checkpoint))
    if planned is None:
        return None
    # the batch in flight, or the next one, starts where the newest committed batch ended;
    # with none committed, the first batch reads the snapshot its offset names
    batch = committed.batch_id if committed is not None else planned.batch_id
    text = planned_source_offset(spark, checkpoint, batch)
    if text is None:
        return 0
    try:
        return int(json.loads(text)["reservoirVersion"])
    except (ValueError, KeyError, TypeError):
        return 0


def first_unread_commit(spark: SparkSession, layout: Layout, bronze_table: str) -> float | None:
    """When (seconds since the epoch) the first version of ``bronze_table`` that silver has
    yet to read and that adds data was committed; None when there is none, or silver has no
    query yet. Versions that only rearrange files (OPTIMIZE: ``dataChange`` false) are not
    read by a stream. A version whose log entry is gone counts as committed at 0 (long ago)."""
    version = first_unread_version(spark, layout, bronze_table)
    if version is None:
        return None
    for unread in range(version, table_version(bronze_table, spark) + 1):
        entry = f"{bronze_table}/_delta_log/{unread:020d}.json"
        lines = read_text_lines(spark, entry)
        if lines is None:
            return 0.0
        if any(_adds_data(line) for line in lines):
            _, path, fs = hadoop_path(spark, entry)
            return int(fs.getFileStatus(path).getModificationTime()) / 1000.0
    return None


def _adds_data(line: str) -> bool:
    """Whether a Delta log line adds a file with new data (``add`` with ``dataChange``)."""
    if '"add"' not in line:
        return False
    try:
        add = json.loads(line).get("add")
    except ValueError:
        return True  # not understood: counted as data, the safe side
    return isinstance(add, dict) and add.get("dataChange", True) is not False


def silver_unread_since(spark: SparkSession, layout: Layout, table: str) -> float | None:
    """:func:`first_unread_commit` for a table of bronze, None for any other table."""
    if location_key(table.rstrip("/").rsplit("/", 1)[0]) != location_key(layout.bronze):
        return None  # (listed through Hadoop, a path may be spelled file:/...)
    return first_unread_commit(spark, layout, table)


def vacuum_unsafe(unread_since: float | None, retention_hours: float) -> str | None:
    """Why VACUUM with ``retention_hours`` could delete files a reader still needs, whose
    first unread version was committed at ``unread_since``; None when it cannot."""
    if unread_since is None or unread_since >= time.time() - retention_hours * 3600:
        return None
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(unread_since))
    return (
        f"silver has yet to read a version committed {when}, before the {retention_hours:g} h "
        "retention: VACUUM could delete files it needs"
    )
