"""The silver versions last published as asset events, kept across tries, runs and DAGs.

A silver run that fails after committing some tables publishes nothing (Airflow emits a task's
asset events only when it succeeds), and its retry sees those tables' versions as they are
now: without a record of what was published, their changes would never be announced. So the
operators that publish silver (protolake_ingest's ``silver``, protolake_maintenance's
``replay``) compare against the versions of their last publication, kept in the Airflow
Variable :func:`variable_key` of the lakehouse (shared by every worker), and store the new ones
after publishing. Before any publication, the versions at the start of the run are the
baseline. Two DAGs publishing at once may announce a change twice; a worker lost between
storing the versions and Airflow recording the task's success misses them.

Importing this module loads only the standard library (the DAG files import its importer).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)


def variable_key(lakehouse: str) -> str:
    """The Variable holding ``lakehouse``'s last published silver versions."""
    return f"protolake_silver_published_{hashlib.sha256(lakehouse.encode()).hexdigest()[:16]}"


def last_published(lakehouse: str) -> dict[str, int] | None:
    """``{silver table: Delta version}`` as last published for ``lakehouse`` (None: never, or
    a Variable that is not such a record, which is logged)."""
    from airflow.sdk import Variable

    raw = Variable.get(variable_key(lakehouse), default=None)
    if raw is None:
        return None
    try:
        versions = json.loads(raw)["versions"]
        return {str(table): int(version) for table, version in versions.items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        log.warning(
            "Variable %s is not a record of published versions: ignored", variable_key(lakehouse)
        )
        return None


def remember_published(lakehouse: str, versions: Mapping[str, int]) -> None:
    """Store ``versions`` as ``lakehouse``'s last published silver versions."""
    from airflow.sdk import Variable

    record = {"lakehouse": lakehouse, "versions": dict(sorted(versions.items()))}
    Variable.set(variable_key(lakehouse), json.dumps(record))


def changed_tables(before: Mapping[str, int], after: Mapping[str, int]) -> list[str]:
    """The tables of ``after`` whose version is not the one in ``before``."""
    return sorted(t for t, v in after.items() if before.get(t) != v)


def baseline(lakehouse: str, now: Any) -> dict[str, int]:
    """What a run compares against: the last published versions; before any publication,
    ``now()``, stored as such (a first run that fails leaves its retry that baseline)."""
    published = last_published(lakehouse)
    if published is not None:
        return published
    versions = dict(now())
    remember_published(lakehouse, versions)
    return versions
