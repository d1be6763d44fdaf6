"""Helpers shared by the ``protolake`` operations commands.

- :func:`emit`: JSON on stdout (``--json``) or a human rendering.
- :func:`progress`: a rich progress display on stderr (silent when stderr is not a terminal).
- :func:`effective_reason`: a quarantined record's current reason: the reason of its last
  replay when one failed, else the reason it was quarantined with.
- :func:`loaded_config`: an operations command's configuration, refused (``status``,
  ``audit``) or warned about (``maintain``, ``replay``, ``sql``) when its local lakehouse
  folder does not exist.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from lakehouse.layout import local_path
from pipelines.settings import ConfigError, ProtolakeConfig, load_config

log = logging.getLogger("pipelines.ops")


def loaded_config(path: str, *, missing_ok: bool = False) -> ProtolakeConfig:
    """The configuration at ``path`` of an operations command, with its local lakehouse folder
    looked at: a typo in the path must not read as an empty, healthy lakehouse.

    ``missing_ok``: a folder that does not exist is a warning, not an error (``maintain``,
    ``replay`` and ``sql`` find nothing to do in a lakehouse not written yet, as on a fresh
    deployment the maintenance DAG runs on). An object-store root is checked by the session's
    preflight instead.

    Raises:
        ConfigError: as ``load_config``; or, unless ``missing_ok``, ``lakehouse.path`` is a
            local folder that does not exist (``status`` and ``audit``: an audit would pass
            on nothing). The jobs create it on their first run.
    """
    cfg = load_config(path)
    local = local_path(cfg.lakehouse_path)
    if local is None or local.is_dir():
        return cfg
    if missing_ok:
        log.warning(
            "lakehouse.path: %s does not exist (bronze and silver create it on their first "
            "run): nothing to do there; is the path right?",
            local,
        )
        return cfg
    raise ConfigError(
        f"lakehouse.path: {local} does not exist (bronze and silver create it on their "
        "first run); is the path right?"
    )


def effective_reason() -> Any:
    """Column: the current reason of a quarantine row (see the module docstring)."""
    from pyspark.sql import functions as F  # noqa: N812

    from pipelines.quarantine import REPLAYED

    outcome = F.col("replay_outcome")
    return F.when(outcome.isNotNull() & (outcome != REPLAYED), outcome).otherwise(
        F.col("reason_code")
    )


def to_jsonable(value: Any) -> Any:
    """Plain JSON types for dicts/lists of Spark values (datetimes as ISO 8601 UTC)."""
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [to_jsonable(v) for v in value]
    if isinstance(value, datetime):
        v = value if value.tzinfo else value.replace(tzinfo=UTC)
        return v.astimezone(UTC).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return value


def emit(as_json: bool, data: Mapping[str, Any], human: Callable[[Any], None]) -> None:
    """Print ``data`` as one JSON document, or call ``human(console)`` (rich, stdout)."""
    if as_json:
        sys.stdout.write(json.dumps(to_jsonable(data), sort_keys=True) + "\n")
        sys.stdout.flush()
        return
    from rich.console import Console

    # piped output (logs, `| less`) gets wide tables instead of columns cut at 80 characters
    human(Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200))


def table(title: str, columns: list[str], rows: list[list[Any]]) -> Any:
    """A rich table (numbers right-aligned)."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for i, c in enumerate(columns):
        numeric = bool(rows) and all(
            isinstance(r[i], int | float) for r in rows if r[i] is not None
        )
        t.add_column(c, justify="right" if numeric else "left")
    for r in rows:
        t.add_row(*(_cell(v) for v in r))
    return t


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return (
            value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
            if value.tzinfo
            else (value.strftime("%Y-%m-%d %H:%M:%S"))
        )
    return str(value)


class Steps:
    """A progress display of named steps (and counted loops) on stderr."""

    def __init__(self, progress: Any) -> None:
        self._p = progress

    @contextmanager
    def step(self, description: str) -> Iterator[None]:
        """An indeterminate step: a spinner while it runs."""
        task = self._p.add_task(description, total=None) if self._p else None
        try:
            yield
        finally:
            if task is not None:
                self._p.update(task, total=1, completed=1)

    def track(self, items: list[Any], description: str) -> Iterator[Any]:
        """Iterate ``items`` with a counted bar."""
        if not self._p:
            yield from items
            return
        task = self._p.add_task(description, total=len(items))
        for item in items:
            yield item
            self._p.advance(task)


@contextmanager
def progress(enabled: bool = True) -> Iterator[Steps]:
    """Progress bars on stderr (only when stderr is a terminal and ``enabled``)."""
    if not enabled or not sys.stderr.isatty():
        yield Steps(None)
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as p:
        yield Steps(p)


def parse_time(value: str) -> datetime:
    """An ISO 8601 date or date-time (naive means UTC), for ``--since``/``--until``."""
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"not an ISO 8601 time: {value!r}") from exc
    return t if t.tzinfo else t.replace(tzinfo=UTC)
