"""A HiveServer2 client (PyHive) for the SQL endpoint, and a poll for what a stream changes.

``query(sql, port=...)`` runs one statement on a new connection and returns its rows as
tuples; ``hive(...)`` opens a cursor for several (``with hive() as cur``). Both default to
the stack's endpoint (``tests.support.stack.SQL_HOST``/``SQL_PORT``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.support.stack import SQL_HOST, SQL_PORT


class _Cursor:
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def __enter__(self) -> Any:
        return self.conn.cursor()

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def hive(port: int = SQL_PORT, **kwargs: Any) -> Any:
    """A context manager giving a cursor on a new connection to the endpoint on ``port``."""
    from pyhive import hive as pyhive

    return _Cursor(pyhive.connect(host=SQL_HOST, port=port, **kwargs))


def query(sql: str, **kwargs: Any) -> list[tuple[Any, ...]]:
    """The rows of one statement (``kwargs`` go to :func:`hive`)."""
    with hive(**kwargs) as cur:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]


def eventually(probe: Callable[[], Any], want: Any, seconds: float = 240) -> Any:
    """Poll ``probe()`` until it returns ``want`` (errors count as not yet: a restart)."""
    deadline, got = time.monotonic() + seconds, None
    while time.monotonic() < deadline:
        try:
            got = probe()
        except Exception as exc:  # noqa: BLE001 - the endpoint may be reconnecting
            got = exc
        if got == want:
            return got
        time.sleep(2)
    raise AssertionError(f"still {got!r} after {seconds} s, wanted {want!r}")
