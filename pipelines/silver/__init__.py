"""Silver: decode bronze records into one Delta table per message type, plus quarantine.

See :mod:`pipelines.silver.job` for the queries, :mod:`pipelines.silver.batch` for the
contract of a micro-batch and :mod:`pipelines.silver.cli` for ``protolake silver``. Public API::

    run(cfg, trigger=None, *, spark=None, bronze_table_names=None) -> SilverRun
"""

from pipelines.silver.batch import SilverBatch
from pipelines.silver.job import SilverRun, run, summarize
from pipelines.silver.rejects import SCHEMA_CONFLICT

__all__ = [
    "SCHEMA_CONFLICT",
    "SilverBatch",
    "SilverRun",
    "run",
    "summarize",
]
