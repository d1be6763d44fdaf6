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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.checkpoints import newest_batch, planned_source_offset, read_text_lines
from lakehouse.hadoop import hadoop_path
from lakehouse.layout import Layout, location_key, table_name
from lakehouse.tables import table_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Unread:
    """Where silver's query of a bronze table reads on: from ``version`` on; ``snapshot``:
    every file of that version's snapshot too (a query still reading the table as it was
    when it began), whatever version added it."""

    version: int
    snapshot: bool


def first_unread(spark: SparkSession, layout: Layout, bronze_table: str) -> Unread | None:
    """Where silver's query of ``bronze_table`` reads on, or None: no query yet (its first
    batch reads the table as it then is). A first batch not committed yet, or an offset not
    in Delta's form, may need any file: from version 0, snapshot and all."""
    checkpoint = layout.checkpoint("silver", table_name(bronze_table))
    committed = newest_batch(spark, Layout.commit_log(checkpoint))
    if newest_batch(spark, Layout.offset_log(checkpoint)) is None:
        return None
    if committed is None:
        return Unread(0, snapshot=True)
    # the batch in flight, or the next one, starts where the newest committed batch ended
    text = planned_source_offset(spark, checkpoint, committed.batch_id)
    try:
        offset = json.loads(text or "")
        return Unread(int(offset["reservoirVersion"]), bool(offset["isStartingVersion"]))
    except (ValueError, KeyError, TypeError):
        return Unread(0, snapshot=True)


def first_unread_commit(spark: SparkSession, layout: Layout, bronze_table: str) -> float | None:
    """When (seconds since the epoch) the first version of ``bronze_table`` whose files silver
    may still read was committed; None when there is none, or silver has no query yet.
    Reading on from a version, the first one that adds data counts (a stream does not read
    the files of versions that only rearrange them, OPTIMIZE's: ``dataChange`` false); reading
    a snapshot, that version itself (every file of it is needed, wherever it came from). A
    version whose log entry is gone counts as committed at 0 (long ago)."""
    unread = first_unread(spark, layout, bronze_table)
    if unread is None:
        return None
    for version in range(unread.version, table_version(bronze_table, spark) + 1):
        entry = f"{bronze_table}/_delta_log/{version:020d}.json"
        lines = read_text_lines(spark, entry)
        if lines is None:
            return 0.0
        if unread.snapshot or any(_adds_data(line) for line in lines):
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
