"""Which silver versions were announced as asset events, read from Airflow's own record.

The operators that publish silver (protolake_ingest's ``silver``, protolake_maintenance's
``replay``) announce every silver table whose Delta version changed since it was last
announced: one asset event ``protolake://silver/<table>`` through the asset alias
:data:`SILVER_ALIAS`, its ``extra`` naming the lakehouse, the table and the version
(:func:`publish`). Airflow records a task's asset events only when the task succeeds, and then
in the same transaction as its success. So what was announced is exactly what those events
say: a try that failed after committing some tables (the job failed, or its worker was lost at
any point, even after adding the events) announced nothing, and the next try or run that
succeeds announces those tables.

:func:`baseline` reads the events through the alias (the task declares the alias as an inlet
too) and keeps what they say in the Airflow Variable :func:`variable_key` of the lakehouse,
with the time of the newest event it has read, so that each run reads only the events since
(and :data:`OVERLAP` before, for an event whose transaction committed after a newer one's).
The Variable holds only what recorded events said. Before any record, the versions at the
start of the first run are the baseline (kept in the Variable: a first run that fails leaves
its retry that baseline). Two DAGs publishing at once may announce a change twice.

Importing this module loads only the standard library (the DAG files import its importer).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

log = logging.getLogger(__name__)

#: the asset alias every silver table's events go through
SILVER_ALIAS = "protolake-silver"
#: how far before the newest event read last time :func:`baseline` reads again
OVERLAP = timedelta(minutes=10)


def variable_key(lakehouse: str) -> str:
    """The Variable holding what ``lakehouse``'s recorded events announced."""
    return f"protolake_silver_published_{hashlib.sha256(lakehouse.encode()).hexdigest()[:16]}"


def silver_asset_uri(table: str) -> str:
    """The asset a silver table's changes are announced as."""
    return f"protolake://silver/{table}"


@dataclass(frozen=True)
class Announced:
    """``{silver table: Delta version}`` as last announced, and the time of the newest event
    read (ISO 8601; None: no event read yet)."""

    versions: dict[str, int]
    through: str | None = None

    def to_json(self, lakehouse: str) -> str:
        record = {"lakehouse": lakehouse, "versions": dict(sorted(self.versions.items()))}
        return json.dumps({**record, "through": self.through})


def changed_tables(before: Mapping[str, int], after: Mapping[str, int]) -> list[str]:
    """The tables of ``after`` whose version is not the one in ``before``."""
    return sorted(t for t, v in after.items() if before.get(t) != v)


def baseline(alias_events: Any, lakehouse: str, now: Callable[[], Mapping[str, int]]) -> dict:
    """What a run compares against: the versions ``lakehouse``'s recorded events announced
    last, per table; a table never announced keeps the version of the first baseline.

    ``alias_events``: ``context["inlet_events"][AssetAlias(SILVER_ALIAS)]``. ``now()``: the
    tables' versions now, read only before any record exists.
    """
    stored = stored_announced(lakehouse)
    since = None if stored is None or stored.through is None else _before(stored.through)
    events = list(alias_events.after(since) if since else alias_events)
    latest, through = announced_in(events, lakehouse)
    base = stored.versions if stored is not None else dict(now())
    current = Announced({**base, **latest}, through or (stored.through if stored else None))
    if current != stored:
        from airflow.sdk import Variable

        Variable.set(variable_key(lakehouse), current.to_json(lakehouse))
    return dict(current.versions)


def publish(
    alias_events: Any, lakehouse: str, before: Mapping[str, int], after: Mapping[str, int]
) -> list[str]:
    """Add an event per table of ``after`` whose version is not ``before``'s (returned).

    ``alias_events``: ``context["outlet_events"][AssetAlias(SILVER_ALIAS)]``; Airflow records
    the events when the task succeeds.
    """
    from airflow.sdk import Asset

    changed = changed_tables(before, after)
    for table in changed:
        extra = {"lakehouse": lakehouse, "table": table, "delta_version": after[table]}
        alias_events.add(Asset(silver_asset_uri(table)), extra=extra)
    return changed


def announced_in(events: Iterable[Any], lakehouse: str) -> tuple[dict[str, int], str | None]:
    """The newest version each of ``events`` announced per table of ``lakehouse`` (events of
    other lakehouses, or with another ``extra``, are passed over), and the time of the newest
    event of all (None: no event)."""
    ordered = sorted(events, key=lambda e: (e.timestamp, e.id))
    latest: dict[str, int] = {}
    for event in ordered:
        extra = event.extra or {}
        table, version = extra.get("table"), extra.get("delta_version")
        if extra.get("lakehouse") == lakehouse and isinstance(table, str):
            if isinstance(version, int) and not isinstance(version, bool):
                latest[table] = version
    return latest, (ordered[-1].timestamp.isoformat() if ordered else None)


def stored_announced(lakehouse: str) -> Announced | None:
    """What the Variable of ``lakehouse`` holds (None: nothing, or a Variable that is not such
    a record, which is logged)."""
    from airflow.sdk import Variable

    raw = Variable.get(variable_key(lakehouse), default=None)
    if raw is None:
        return None
    try:
        record = json.loads(raw)
        versions = {str(t): int(v) for t, v in record["versions"].items()}
        through = record.get("through")
        return Announced(versions, str(through) if through is not None else None)
    except (ValueError, KeyError, TypeError, AttributeError):
        log.warning(
            "Variable %s is not a record of announced versions: ignored", variable_key(lakehouse)
        )
        return None


def _before(through: str) -> str | None:
    """:data:`OVERLAP` before ``through``; None (every event is read again) for what is not a
    time with its zone (Airflow compares aware times)."""
    try:
        when = datetime.fromisoformat(through)
    except ValueError:
        return None
    return None if when.tzinfo is None else (when - OVERLAP).isoformat()
