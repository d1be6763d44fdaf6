"""Running Structured Streaming queries of the lakehouse: triggers, awaiting, stopping, watching.

- :func:`with_trigger`: ``available-now`` (take what is there, then stop) or
  ``processing-time`` (every ``interval``, until stopped).
- :func:`await_queries` waits in short polls, so Python signal handlers run meanwhile;
  :func:`stop_on_signals` stops the queries on SIGTERM/SIGINT (an unfinished batch is
  replayed from the checkpoint on restart).
- :class:`QueryGroup`: queries that may grow while they are awaited (a job that follows its
  source folder); awaiting it watches every query at once and, when one fails, stops the
  others and raises that failure.
- :class:`TableWatcher`: polls a folder for Delta tables
  (:func:`lakehouse.tables.list_delta_tables`) and calls back once per table, those already
  there first, then each one that appears; a listing that fails (an object store's hiccup)
  is logged and tried again at the next poll.

- :func:`run_together`: a micro-batch's commits to (or checks of) several tables at once
  (driver threads that keep the batch's Spark properties), every one to its end, their
  results in order, the first failure raised.

The checkpoint folder's own files (app ids, offset and commit logs) are
``lakehouse.checkpoints``.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from lakehouse.layout import table_name
from lakehouse.tables import list_delta_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)
T = TypeVar("T")

TRIGGERS = ("available-now", "processing-time")


def run_together(tasks: Sequence[Callable[[], T]]) -> list[T]:
    """Run ``tasks`` at the same time, wait for all of them and return their results in
    order; raise the failure of the first task (in ``tasks``' order) that failed.

    Meant for a ``foreachBatch`` that commits to several Delta tables or checks several
    tables: a small batch's time goes mostly to each Spark job's and commit's driver work (the
    plan, the transaction, the log, the checksum), one after the other; run together they
    overlap each other and the other tasks' Spark jobs. Each task runs in a
    ``pyspark.InheritableThread``, which carries the batch thread's Spark properties (job
    group, streaming query id) into its jobs. Every task runs to its end even when another
    fails, so a failed batch leaves no commit half-started behind it; the tasks must be
    idempotent (the batch is run again after a failure).
    """
    if len(tasks) <= 1:
        return [task() for task in tasks]
    from pyspark import InheritableThread

    results: list[Any] = [None] * len(tasks)
    failures: dict[int, BaseException] = {}

    def run(index: int, task: Callable[[], T]) -> None:
        try:
            results[index] = task()
        except BaseException as exc:  # noqa: BLE001 - raised below, in the caller's thread
            failures[index] = exc

    threads = [InheritableThread(target=run, args=(i, task)) for i, task in enumerate(tasks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    errors = [failures[i] for i in sorted(failures)]
    for other in errors[1:]:  # raised is the first; the others would leave no trace
        log.warning("run_together: another task failed too: %r", other)
    if errors:
        raise errors[0]
    return results


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


class StopRequest:
    """What :func:`stop_on_signals` saw: whether a signal asked to stop, and a failure the
    queries had already met when it came (which the stop must not hide)."""

    #: how long :meth:`explains_failure` waits for the stop thread to have looked
    LOOK_SECONDS = 10.0

    def __init__(self) -> None:
        self._asked = threading.Event()
        self._looked = threading.Event()
        self.failed_before: BaseException | None = None

    def is_set(self) -> bool:
        """Whether a signal asked to stop."""
        return self._asked.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until a signal asks to stop (False: ``timeout`` passed first)."""
        return self._asked.wait(timeout)

    def explains_failure(self) -> bool:
        """Whether a failure met while awaiting the queries comes from this stop: a signal
        asked to stop, and nothing had failed before it came. Waits (at most
        :data:`LOOK_SECONDS`) until the stop thread has looked: a query that died as the
        signal came may end the wait before it did. Not known by then: taken as the stop's."""
        if not self.is_set():
            return False
        self._looked.wait(self.LOOK_SECONDS)
        return self.failed_before is None

    def _ask(self) -> None:
        self._asked.set()

    def _note(self, failure: BaseException | None) -> None:
        self.failed_before = failure
        self._looked.set()


def stop_on_signals(queries: Sequence[StreamingQuery] | QueryGroup, job: str = "") -> StopRequest:
    """On SIGTERM/SIGINT, stop the queries (an unfinished batch is replayed on restart).

    The handler marks the returned request, then stops the queries from a thread of its own
    (a signal interrupts the main thread inside its calls to the JVM, whose Py4J connection
    cannot take another call); awaiting the queries returns once they have stopped. That
    thread first notes a failure already there (a query that ended with an error, a group's
    :meth:`QueryGroup.fail`): the caller raises it rather than take it for the stop.

    Args:
        queries: the queries, or a group (stopping it also stops its growth).
        job: the job's name, for the log.

    Returns:
        The request (only the main thread can install handlers; elsewhere it is never set).
    """
    requested = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        return requested
    who = f"{job}: " if job else ""

    def stop() -> None:
        requested._note(_failure_of(queries))
        if isinstance(queries, QueryGroup):
            queries.stop()
            return
        for query in queries:
            _stop_quietly(query)

    def handler(signum: int, frame: FrameType | None) -> None:
        log.warning("%s%s received, stopping", who, signal.Signals(signum).name)
        requested._ask()
        # Not in this thread: the signal interrupts the main thread in the middle of a call to
        # the JVM (awaiting the queries), whose Py4J connection cannot take a second call
        # ("reentrant call"); another thread has a connection of its own.
        threading.Thread(target=stop, name=f"{job or 'stream'}-stop").start()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return requested


def _failure_of(queries: Sequence[StreamingQuery] | QueryGroup) -> BaseException | None:
    """The first failure among ``queries`` now: the group's own, or a query's (Spark records
    it before the query counts as ended)."""
    group_error = queries.error if isinstance(queries, QueryGroup) else None
    if group_error is not None:
        return group_error
    listed = queries.queries if isinstance(queries, QueryGroup) else queries
    try:
        for query in listed:
            error = query.exception()
            if error is not None:
                return error  # type: ignore[return-value]
    except Exception as exc:  # noqa: BLE001 - the JVM may be going down with us
        log.warning("reading the queries' state before stopping them: %s", type(exc).__name__)
    return None


class QueryGroup:
    """Streaming queries that may grow while they are awaited.

    A group is *growing* until :meth:`done_growing` (or :meth:`stop`): :meth:`await_all`
    returns once the group has stopped growing and every query has ended, and raises as soon
    as any query fails (after stopping the others), or when whatever adds queries reported a
    failure (:meth:`fail`). Safe to use from several threads.
    """

    def __init__(self, queries: Iterable[StreamingQuery] = (), *, growing: bool = False) -> None:
        self._lock = threading.Lock()
        self._queries: list[StreamingQuery] = list(queries)
        self._growing = growing
        self._stopping = False
        self._error: BaseException | None = None
        self._stop_hooks: list[Callable[[], None]] = []

    @property
    def queries(self) -> list[StreamingQuery]:
        """The queries so far (a copy)."""
        with self._lock:
            return list(self._queries)

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopping

    @property
    def error(self) -> BaseException | None:
        """The failure reported by whatever adds queries (:meth:`fail`), if any."""
        return self._error

    def add(self, query: StreamingQuery) -> bool:
        """Add a started query; a group already stopping stops it instead (returns False)."""
        with self._lock:
            if not self._stopping:
                self._queries.append(query)
                return True
        _stop_quietly(query)
        return False

    def on_stop(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` when the group stops (e.g. to stop whatever adds queries)."""
        with self._lock:
            self._stop_hooks.append(hook)

    def done_growing(self) -> None:
        """No query will be added any more."""
        with self._lock:
            self._growing = False

    def fail(self, error: BaseException) -> None:
        """Whatever adds queries failed: :meth:`await_all` stops the group and raises ``error``."""
        with self._lock:
            self._error = self._error or error
            self._growing = False

    def stop(self) -> None:
        """Stop growing and stop every query (each unfinished batch is replayed on restart)."""
        with self._lock:
            self._stopping, self._growing = True, False
            hooks, queries = list(self._stop_hooks), list(self._queries)
        for hook in hooks:
            hook()
        for query in queries:
            _stop_quietly(query)

    def await_all(self, poll_seconds: float = 1.0) -> None:
        """Wait until the group stopped growing and every query ended; raise the first failure.

        Polls instead of blocking in the JVM so that Python signal handlers run meanwhile.
        """
        while True:
            with self._lock:
                queries, growing, error = list(self._queries), self._growing, self._error
            if error is not None:
                self.stop()
                raise error
            active = [q for q in queries if q.isActive]
            try:
                for query in queries:
                    if query not in active and query.exception() is not None:
                        raise query.exception()  # type: ignore[misc]
                if not active and not growing:
                    return
                if active:
                    active[0].awaitTermination(poll_seconds)  # type: ignore[arg-type]  # float: ok
                else:
                    time.sleep(poll_seconds)
            except BaseException:
                self.stop()
                raise


def _stop_quietly(query: StreamingQuery) -> None:
    try:
        query.stop()
    except Exception as exc:  # noqa: BLE001 - the JVM may be going down with us
        log.warning("stopping %s: %s", query.name, type(exc).__name__)


class TableWatcher:
    """Calls ``on_table(path)`` once per Delta table under ``folder``, as tables appear.

    The folder is listed as :func:`lakehouse.tables.list_delta_tables` does: through the
    session's Hadoop file system (any URI), or without a session on a local folder.
    :meth:`poll` lists the folder once (those already there are found by the first poll);
    :meth:`start` polls every ``interval_seconds`` in a daemon thread until :meth:`stop`. With
    ``names``, only those tables count, and the watcher stops by itself once it has seen them
    all. An ``on_table`` that raises stops the watcher and goes to ``on_error``; a listing
    that fails is logged and tried again at the next poll.
    """

    def __init__(
        self,
        spark: SparkSession | None,
        folder: str,
        on_table: Callable[[str], None],
        interval_seconds: float,
        *,
        names: Collection[str] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> None:
        self.spark, self.folder, self.on_table = spark, folder, on_table
        self.interval_seconds = interval_seconds
        self.names = None if names is None else frozenset(names)
        self.on_error, self.on_done = on_error, on_done
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def complete(self) -> bool:
        """Whether every named table has been seen (never, without names)."""
        return self.names is not None and self.names <= self.seen

    def poll(self) -> list[str]:
        """List the folder once; call ``on_table`` for each new table; return their paths."""
        return self._take_new(list_delta_tables(self.folder, self.spark))

    def _take_new(self, paths: list[str]) -> list[str]:
        new = [
            path
            for path in paths
            if table_name(path) not in self.seen
            and (self.names is None or table_name(path) in self.names)
        ]
        for path in new:
            if self._stop.is_set():
                break
            self.on_table(path)
            self.seen.add(table_name(path))
        return new

    def start(self) -> None:
        """Poll in a daemon thread until stopped (or, with names, until all are seen)."""
        self._thread = threading.Thread(
            target=self._run, name=f"table-watcher {self.folder}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop polling (and wait for a poll under way, unless called from the watcher)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self.complete and not self._stop.wait(self.interval_seconds):
                try:
                    paths = list_delta_tables(self.folder, self.spark)
                except Exception as exc:  # noqa: BLE001 - an object store's hiccup: next poll
                    log.warning("listing %s failed, trying again: %s", self.folder, exc)
                    continue
                self._take_new(paths)
        except BaseException as exc:  # noqa: BLE001 - handed to on_error, the caller decides
            log.error("watching %s: %s", self.folder, exc)
            if self.on_error is not None:
                self.on_error(exc)
            return
        if self.on_done is not None:
            self.on_done()
