"""Which bronze records silver has not taken yet: its backlog, read from silver's checkpoints.

A silver query reads one bronze table as a Delta stream; its checkpoint's last committed batch
ends at a Delta source offset: ``reservoirVersion`` V is the next bronze version to read
(``index`` -1), or the version it is part-way through (``index`` >= 0). So every bronze file
added at version V or later may hold records silver has not taken: its backlog, not a loss.
A query that planned its first batch and committed none yet, or is still in its starting
snapshot (``isStartingVersion``), has taken nothing for sure: the whole table is backlog. A
table with no silver checkpoint (silver never ran on it), or one whose offset log is not
understood, has none: its records in neither silver nor quarantine are missing, so an audit
does not pass over a table silver never takes.

:func:`backlog_files` names those files, by their name (a Delta data file's name is unique in
its table), from the data-changing ``add`` actions of the bronze table's commits V and later.
A compaction's files (``dataChange: false``) are left out: they hold records of earlier
versions too, and a record silver lost must not hide among them (a record compacted before
silver took it then counts as missing until silver moves past the compaction: a false alarm,
never a false pass). ``protolake audit`` counts a bronze record in neither silver nor
quarantine as pending rather than missing when its file is one of them
(``pipelines.quarantine.check_invariant``).
"""

from __future__ import annotations

import json
import logging
from urllib.parse import unquote

from pyspark.sql import SparkSession

from lakehouse.checkpoints import newest_batch, planned_source_offset, read_text_lines
from lakehouse.hadoop import hadoop_path
from lakehouse.layout import Layout, table_name

log = logging.getLogger(__name__)

#: the whole table is backlog
EVERY_FILE = None
#: ``_next_version``'s answer for a query that has taken nothing for sure
_NOTHING_TAKEN = -1


def backlog_files(spark: SparkSession, lakehouse_path: str, bronze_path: str) -> set[str] | None:
    """The names of the bronze table's data files that may hold records silver has not taken
    (see the module docstring); :data:`EVERY_FILE` (None) when that is every file, an empty
    set when none is."""
    checkpoint = Layout(lakehouse_path).checkpoint("silver", table_name(bronze_path))
    version = _next_version(spark, checkpoint)
    if version is None:
        return set()
    if version == _NOTHING_TAKEN:
        return EVERY_FILE
    return _files_added_since(spark, bronze_path, version)


def _next_version(spark: SparkSession, checkpoint: str) -> int | None:
    """The bronze version silver's last committed batch reads next or part-way;
    :data:`_NOTHING_TAKEN` when it has taken nothing for sure; None when silver never planned
    a batch of this table, or its offset log is not understood."""
    committed = newest_batch(spark, Layout.commit_log(checkpoint))
    if committed is None:
        planned = newest_batch(spark, Layout.offset_log(checkpoint))
        return None if planned is None else _NOTHING_TAKEN
    text = planned_source_offset(spark, checkpoint, committed.batch_id)
    try:
        offset = json.loads(text) if text is not None else None
    except ValueError:
        offset = None
    if not isinstance(offset, dict) or "reservoirVersion" not in offset:
        log.warning("%s: offset log not understood; no record counts as pending", checkpoint)
        return None
    if offset.get("isStartingVersion"):
        return _NOTHING_TAKEN
    return int(offset["reservoirVersion"])


def _files_added_since(spark: SparkSession, table: str, version: int) -> set[str]:
    """The names of the data files the table's commits ``version`` and later add."""
    jvm, delta_log, fs = hadoop_path(spark, f"{table.rstrip('/')}/_delta_log")
    names: set[str] = set()
    for status in fs.listStatus(delta_log):
        name = status.getPath().getName()
        stem = name.removesuffix(".json")
        if stem == name or not stem.isdigit() or int(stem) < version:
            continue
        for line in read_text_lines(spark, str(status.getPath())) or []:
            added = json.loads(line).get("add") if line.strip() else None
            if added and added.get("dataChange", True):  # not a compaction's (docstring)
                names.add(unquote(added["path"]).rsplit("/", 1)[-1])
    return names
