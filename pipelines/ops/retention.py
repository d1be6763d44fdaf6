"""VACUUM's retention in ``pipelines.ops.maintain`` (``protolake maintain``, and a stream's
own maintenance, ``pipelines.stream_maintenance``): the safety minimum and what a run below it
turns off for its own length (Delta's retention check), and the retention VACUUM keeps.

Both settings are the session's: each is changed for the run only and given back after.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pipelines.settings.config import SAFE_RETENTION_HOURS
from pipelines.spark import configured

log = logging.getLogger("pipelines.ops.maintain")

__all__ = [
    "SAFE_RETENTION_HOURS",
    "RetentionRefusedError",
    "forced_retention",
    "retention_as_asked",
    "retention_check_off",
]
RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
# on in Delta 4.4: VACUUM's RETAIN n HOURS is ignored for the table's
# delta.deletedFileRetentionDuration (7 days by default) unless n is 0
RETENTION_WINDOW_CONF = "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled"


class RetentionRefusedError(ValueError):
    """A retention below Delta's safety minimum without ``force``."""


@contextmanager
def retention_as_asked(spark: Any) -> Iterator[None]:
    """VACUUM keeps the files of the retention it is given (``RETAIN n HOURS``), not the
    table's 7-day default in its place (:data:`RETENTION_WINDOW_CONF`), unless the job set that
    itself; unset again after."""
    if configured(spark, RETENTION_WINDOW_CONF):  # the job's own choice ([spark.conf])
        yield
        return
    spark.conf.set(RETENTION_WINDOW_CONF, "false")
    try:
        yield
    finally:
        spark.conf.unset(RETENTION_WINDOW_CONF)


def forced_retention(retention_hours: float, force_retention: bool) -> bool:
    """Whether VACUUM goes below the safety minimum (forced, with a warning); refused unless
    ``force_retention``."""
    if retention_hours >= SAFE_RETENTION_HOURS:
        return False
    if not force_retention:
        raise RetentionRefusedError(
            f"--retention-hours {retention_hours:g} is below Delta's safety minimum of "
            f"{SAFE_RETENTION_HOURS} h: running streams and readers may lose files they "
            "still need. Add --force-retention if you really mean it."
        )
    log.warning(
        "maintain: VACUUM with %g h retention, below the %d h safety minimum: %s = false",
        retention_hours,
        SAFE_RETENTION_HOURS,
        RETENTION_CHECK_CONF,
    )
    print(
        f"WARNING: vacuuming with {retention_hours:g} h retention (< {SAFE_RETENTION_HOURS} h); "
        f"Delta's safety check is OFF ({RETENTION_CHECK_CONF}=false) for this run",
        file=sys.stderr,
    )
    return True


@contextmanager
def retention_check_off(spark: Any, off: bool) -> Iterator[None]:
    """Delta's retention check off while maintaining (``off``), as the session had it after."""
    if not off:
        yield
        return
    previous = spark.conf.get(RETENTION_CHECK_CONF, None)
    spark.conf.set(RETENTION_CHECK_CONF, "false")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(RETENTION_CHECK_CONF)
        else:
            spark.conf.set(RETENTION_CHECK_CONF, previous)
