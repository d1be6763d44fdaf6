"""Running Structured Streaming queries of the lakehouse: app ids, triggers, awaiting, stopping.

- :func:`load_app_id`: the idempotent-write app id of a checkpoint, a UUID created once and
  kept inside the checkpoint folder (:meth:`lakehouse.layout.Layout.app_id_file`). A new
  checkpoint means a new app id: reusing an old one would make Delta skip the new query's
  first batches.
- :func:`with_trigger`: ``available-now`` (take what is there, then stop) or
  ``processing-time`` (every ``interval``, until stopped).
- :func:`await_queries` waits in short polls, so Python signal handlers run meanwhile;
  :func:`stop_on_signals` stops the queries on SIGTERM/SIGINT (an unfinished batch is
  replayed from the checkpoint on restart).

- :func:`read_text_lines` / :func:`write_text`: small text files (checkpoint logs, app ids,
  the demo's bookkeeping).

Files are read and written through Hadoop's file system of the session: any URI works.
"""

from __future__ import annotations

import logging
import signal
import threading
import uuid
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

from lakehouse.layout import Layout

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

TRIGGERS = ("available-now", "processing-time")


def load_app_id(spark: SparkSession, checkpoint: str) -> str:
    """The idempotent-write app id of a checkpoint: created once, kept inside its folder.

    Raises:
        RuntimeError: the file holds no UUID (the checkpoint is damaged).
    """
    location = Layout.app_id_file(checkpoint)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    path = jvm.org.apache.hadoop.fs.Path(location)
    fs = path.getFileSystem(hadoop_conf)
    if not fs.exists(path):
        fs.mkdirs(path.getParent())
        candidate = str(uuid.uuid4())
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


def read_text_lines(spark: SparkSession, location: str) -> list[str] | None:
    """The lines of a small text file on any Hadoop file system; None when it does not exist."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    path = jvm.org.apache.hadoop.fs.Path(location)
    fs = path.getFileSystem(hadoop_conf)
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
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    path = jvm.org.apache.hadoop.fs.Path(location)
    out = path.getFileSystem(hadoop_conf).create(path, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()


def with_trigger(writer: Any, trigger: str, interval: str) -> Any:
    """``writer`` (a ``DataStreamWriter``) with the trigger named ``trigger``.

    Args:
        trigger: one of :data:`TRIGGERS`.
        interval: the processing-time interval (``"30 seconds"``); unused by available-now.

    Raises:
        ValueError: another trigger.
    """
    if trigger == "available-now":
        return writer.trigger(availableNow=True)
    if trigger == "processing-time":
        return writer.trigger(processingTime=interval)
    raise ValueError(f"trigger: must be one of {', '.join(TRIGGERS)}, got {trigger!r}")


def await_queries(queries: Sequence[StreamingQuery], poll_seconds: int = 1) -> None:
    """Wait until every query has ended; raise the first failure.

    Polls instead of blocking in the JVM so that Python signal handlers run meanwhile.
    """
    for query in queries:
        while not query.awaitTermination(poll_seconds):
            pass
        error = query.exception()
        if error is not None:
            raise error


def stop_on_signals(queries: Sequence[StreamingQuery], job: str = "") -> threading.Event:
    """On SIGTERM/SIGINT, stop the queries (an unfinished batch is replayed on restart).

    Args:
        job: the job's name, for the log.

    Returns:
        An event set once a signal asked to stop (only the main thread can install handlers;
        elsewhere the event is never set).
    """
    requested = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        return requested
    who = f"{job}: " if job else ""

    def handler(signum: int, frame: FrameType | None) -> None:
        log.warning("%s%s received, stopping", who, signal.Signals(signum).name)
        requested.set()
        for query in queries:
            try:
                query.stop()
            except Exception as exc:  # noqa: BLE001 - the JVM may be going down with us
                log.warning("%sstopping %s: %s", who, query.name, type(exc).__name__)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return requested
