"""A streaming query's checkpoint folder, as the lakehouse reads and writes it.

- :func:`load_app_id`: the idempotent-write app id of a checkpoint, a UUID created once and
  kept inside the checkpoint folder (:meth:`lakehouse.layout.Layout.app_id_file`). A new
  checkpoint means a new app id: reusing an old one would skip the new query's first batch
  when it is a replay. A checkpoint a query already ran on without one takes that query's id,
  the app id Spark's Delta sink commits under.
- :func:`replays_of`: which batches of a query about to start may be replays (the one an
  earlier run planned and did not commit), so that only those are looked up before their
  appends (:func:`lakehouse.delta.append_idempotent`).
- :func:`newest_batch`: the newest file of a checkpoint log (``offsets``, ``commits``), its
  batch id and write time (:class:`LogEntry`); :func:`planned_source_offset`: a batch's end
  offset of its one source, from its offset log entry.
- :func:`read_text_lines` / :func:`write_text`: small text files (checkpoint logs, app ids,
  the demo's bookkeeping).

Files are read and written through Hadoop's file system of the session: any URI works.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.delta import Replays
from lakehouse.hadoop import hadoop_path
from lakehouse.layout import Layout

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def load_app_id(spark: SparkSession, checkpoint: str) -> str:
    """The idempotent-write app id of a checkpoint: created once, kept inside its folder.

    Created as a new UUID, or as the id of the query that already ran on the checkpoint
    (:func:`query_id`): Spark's Delta sink commits each batch under that id, so appends that
    take over such a query (bronze's single table, once written by the sink) skip the batch
    it committed and a crash kept out of the commit log.

    Raises:
        RuntimeError: the file holds no UUID, or Spark's ``metadata`` file no query id (the
            checkpoint is damaged).
    """
    location = Layout.app_id_file(checkpoint)
    _, path, fs = hadoop_path(spark, location)
    if not fs.exists(path):
        fs.mkdirs(path.getParent())
        candidate = query_id(spark, checkpoint) or str(uuid.uuid4())
        try:
            out = fs.create(path, False)  # no overwrite: a concurrent creator wins, we read it
            try:
                out.write(bytearray(candidate.encode("ascii")))
            finally:
                out.close()
        except Exception:  # noqa: BLE001 - py4j error when the file appeared meanwhile
            if not fs.exists(path):
                raise
    lines = read_text_lines(spark, location) or [""]
    app_id = lines[0].strip()
    try:
        uuid.UUID(app_id)
    except ValueError as exc:
        raise RuntimeError(f"{location}: not a UUID; the checkpoint is damaged") from exc
    return app_id


def query_id(spark: SparkSession, checkpoint: str) -> str | None:
    """The id of the streaming query of ``checkpoint`` (Spark's ``metadata`` file, written
    when a query first starts on it), or None before any has."""
    lines = read_text_lines(spark, Layout.query_metadata(checkpoint))
    if not lines:
        return None
    try:
        value = str(json.loads(lines[0])["id"])
        uuid.UUID(value)
    except (ValueError, KeyError, TypeError):
        where = Layout.query_metadata(checkpoint)
        raise RuntimeError(f"{where}: no query id; the checkpoint is damaged") from None
    return value  # as Spark wrote it: the sink's commits name it so


def replays_of(spark: SparkSession, checkpoint: str) -> Replays:
    """Which batches of the query about to start on ``checkpoint`` an earlier run may have
    written (read before the query starts: see :class:`lakehouse.delta.Replays`).

    The newest planned batch (``offsets/<id>``) without a commit (``commits/<id>``) is run
    again by Spark: it may be a replay, planned at its offset log's ``batchTimestampMs`` (or,
    when that cannot be read, its file's modification time). Every batch after the newest
    planned one is fresh.
    """
    planned = newest_batch(spark, Layout.offset_log(checkpoint))
    if planned is None:
        return Replays(fresh_from=0)
    newest = planned.batch_id
    committed = newest_batch(spark, Layout.commit_log(checkpoint))
    if committed is not None and committed.batch_id >= newest:
        return Replays(fresh_from=newest + 1)
    entry = f"{Layout.offset_log(checkpoint)}/{newest}"
    lines = read_text_lines(spark, entry) or []
    try:
        planned_ms = int(json.loads(lines[1])["batchTimestampMs"])
    except (IndexError, ValueError, KeyError, TypeError):
        planned_ms = planned.modified_ms
        log.warning(
            "%s: no batchTimestampMs; the file's time (%d) stands for it", entry, planned_ms
        )
    return Replays(fresh_from=newest + 1, planned_ms=planned_ms)


@dataclass(frozen=True)
class LogEntry:
    """A file of a checkpoint log (``offsets/<id>``, ``commits/<id>``): its batch id and when
    it was written (milliseconds since the epoch, the file system's modification time)."""

    batch_id: int
    modified_ms: int


def newest_batch(spark: SparkSession, folder: str) -> LogEntry | None:
    """The newest file of a checkpoint log folder (by batch id); None when the folder is
    missing or holds none.

    The one place that lists a checkpoint log through Spark's file systems (any Hadoop URI);
    the DAGs list the same folders without a JVM (``dags/protolake_support/progress.py``).
    """
    _, path, fs = hadoop_path(spark, folder)
    if not fs.exists(path):
        return None
    newest: LogEntry | None = None
    for status in fs.listStatus(path):
        name = status.getPath().getName()
        if name.isdigit() and (newest is None or int(name) > newest.batch_id):
            newest = LogEntry(int(name), int(status.getModificationTime()))
    return newest


def planned_source_offset(spark: SparkSession, checkpoint: str, batch_id: int) -> str | None:
    """The end offset of the one source of batch ``batch_id`` (its JSON text), from Spark's
    offset log entry ``offsets/<id>``: a version line, the batch's metadata, a line per
    source. None when the entry is missing or not in that form (another log version, several
    sources)."""
    lines = read_text_lines(spark, f"{Layout.offset_log(checkpoint)}/{batch_id}")
    if lines is None or len(lines) != 3 or lines[0].strip() != "v1":
        return None
    return lines[2]


def read_text_lines(spark: SparkSession, location: str) -> list[str] | None:
    """The lines of a small text file on any Hadoop file system; None when it does not exist."""
    jvm, path, fs = hadoop_path(spark, location)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        reader = jvm.java.io.BufferedReader(jvm.java.io.InputStreamReader(stream, "UTF-8"))
        lines: list[str] = []
        while (line := reader.readLine()) is not None:
            lines.append(str(line))
        return lines
    finally:
        stream.close()


def write_text(spark: SparkSession, location: str, text: str) -> None:
    """Write a small UTF-8 text file on any Hadoop file system, replacing what was there.

    On an object store the file appears whole when it is closed (a single PUT); locally,
    Hadoop writes it in place.
    """
    _, path, fs = hadoop_path(spark, location)
    out = fs.create(path, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()
