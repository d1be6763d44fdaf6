"""How long quality results are kept: ``[quality] results_retention_days``.

Silver prunes when it starts; ``protolake maintain`` for the ``quality`` (or ``all``) group,
and a processing-time silver on an object store at each maintenance pass
(``pipelines.stream_maintenance``), prune before compacting (a long-running stream does not
restart). All call :func:`prune_quality_results`, the one place the setting meets
``quality.results``.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.settings import ProtolakeConfig

log = logging.getLogger("pipelines.quality_retention")


def prune_quality_results(spark: SparkSession, cfg: ProtolakeConfig) -> int | None:
    """Delete quality results older than ``quality.results_retention_days``.

    Returns:
        How many went, or None when the setting is 0 (keep everything).
    """
    days = cfg.quality.results_retention_days
    if days <= 0:
        return None
    from quality.results import prune_results

    deleted = prune_results(spark, cfg.lakehouse_path, datetime.now(UTC) - timedelta(days=days))
    if deleted:
        log.info("quality: deleted %d quality results older than %d days", deleted, days)
    return deleted
