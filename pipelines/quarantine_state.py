"""Which quarantine rows still count as quarantined: the one rule every count shares.

``protolake replay`` never deletes a quarantine row: it sets ``replay_outcome``. A row whose
outcome is :data:`REPLAYED` has moved to a silver table and is counted there; a row with no
outcome, or with a failure reason as outcome, is still quarantined. ``protolake status``,
``protolake audit`` (the invariant), the demo, replay's selection (through
``pipelines.quarantine.still_quarantined``, the Spark twin of :func:`counts_as_quarantined`) and
the ingest DAG's summary (on values read from the Delta files) all count this way.

Standard library only: the Airflow summary task imports it where Spark may not be installed.
"""

from __future__ import annotations

REPLAYED = "replayed"
OUTCOME_COLUMN = "replay_outcome"


def counts_as_quarantined(replay_outcome: str | None) -> bool:
    """True when a quarantine row with this ``replay_outcome`` still counts as quarantined."""
    return replay_outcome != REPLAYED
