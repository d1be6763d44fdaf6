"""What a person watching a job sees: one short line per stage and micro-batch, a bar when the
total is known.

Lines go to the ``pipelines.progress`` logger at INFO; :func:`pipelines.cli.configure_logging`
prints them as they are on stderr by default, and not with ``--json`` (the metrics' JSON
lines stand in for them there). A micro-batch's line comes from its query progress, silver's
from the end of the batch itself (:mod:`pipelines.metrics` calls :func:`report_batch`)::

    bronze  batch 3: 412 records -> 4 tables in 0.9 s  [######--------------]  1236/4000
    silver  demo_orders batch 2: 120 records -> 118 rows, 2 quarantined in 1.4 s

A stage that knows how many records it will take says so first (:func:`expect`); its batch
lines then carry a bar. :class:`ProgressBar` draws one for a loop of known length (redrawn in
place on a terminal, a line per quarter otherwise).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Mapping
from typing import IO, Any

from pipelines.log_names import PROGRESS_LOGGER

log = logging.getLogger(PROGRESS_LOGGER)

_lock = threading.Lock()
_expected: dict[str, int] = {}  # stage -> records it will take
_done: dict[str, int] = {}  # stage -> records taken so far


def say(text: str, *args: Any) -> None:
    """One progress line (``%``-style arguments, as logging takes them)."""
    log.info(text, *args)


def expect(stage: str, total: int | None) -> None:
    """``stage`` (``bronze``, ``silver``) will take ``total`` records (None: unknown)."""
    with _lock:
        _done[stage] = 0
        if total:
            _expected[stage] = total
        else:
            _expected.pop(stage, None)


def bar(done: int, total: int, width: int = 20) -> str:
    """``[#####---------------]  250/1000`` (full at or past the total)."""
    filled = min(width, width * done // total) if total > 0 else width
    return f"[{'#' * filled}{'-' * (width - filled)}]  {done}/{total}"


def stage_of(query: str) -> str:
    """The stage a query belongs to, from its name (``protolake-bronze-*``, ``silver_*``)."""
    if query.startswith("protolake-bronze"):
        return "bronze"
    if query.startswith("silver_"):
        return "silver"
    return query


def batch_line(record: Mapping[str, Any]) -> str:
    """The short line of one micro-batch (``record``: :func:`pipelines.metrics.record_progress`)."""
    query = str(record.get("query") or "")
    stage = stage_of(query)
    records = int(record.get("records_in") or 0)
    head = f"{stage:<7} batch {record.get('batch_id')}: {records} records"
    if stage == "silver":
        head = f"{stage:<7} {query.removeprefix('silver_')} batch {record.get('batch_id')}: "
        head += f"{records} records"
    outcome = ""
    if "decoded" in record:
        rows = sum(int(n) for n in (record.get("decoded") or {}).values())
        quarantined = sum(int(n) for n in (record.get("quarantined") or {}).values())
        outcome = f" -> {rows} rows" + (f", {quarantined} quarantined" if quarantined else "")
    elif record.get("tables"):
        tables = record["tables"]
        outcome = f" -> {len(tables)} table{'s' if len(tables) != 1 else ''}"
    text = f"{head}{outcome} in {float(record.get('duration_seconds') or 0):.1f} s"
    with _lock:
        _done[stage] = _done.get(stage, 0) + records
        total, done = _expected.get(stage), _done[stage]
    if total:
        text += f"  {bar(done, total)}"
    return text


def report_batch(record: Mapping[str, Any]) -> None:
    """Say the line of a micro-batch that took records (idle batches are not news)."""
    if int(record.get("records_in") or 0) > 0:
        log.info(batch_line(record))


class ProgressBar:
    """A bar for a loop of known length: ``update(done)`` as it goes, ``close()`` at the end.

    On a terminal the bar is redrawn in place; elsewhere (a log file, CI) it is printed at
    each quarter, so a log holds four lines, not thousands.
    """

    def __init__(self, label: str, total: int, stream: IO[str] | None = None) -> None:
        self.label, self.total = label, max(0, total)
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._shown_quarter = -1
        self._done = 0

    def update(self, done: int) -> None:
        self._done = done
        if self.tty:
            self.stream.write(f"\r{self.label} {bar(done, self.total)}")
            self.stream.flush()
            return
        quarter = 4 * done // self.total if self.total else 4
        if quarter > self._shown_quarter and quarter in (1, 2, 3, 4):
            self._shown_quarter = quarter
            self.stream.write(f"{self.label} {bar(done, self.total)}\n")
            self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write(f"\r{self.label} {bar(self._done, self.total)}\n")
            self.stream.flush()
        elif self._shown_quarter < 4 and self._done >= self.total:
            self.update(self.total)
