"""Silver: decode bronze records into one Delta table per message type, plus quarantine.

See :mod:`pipelines.silver.job` for the contract. Public API::

    run(cfg, trigger=None, *, spark=None, bronze_table_names=None) -> SilverRun
    add_parser(subparsers)      # `protolake silver`
    main(argv=None)
    register_tables(spark, lakehouse_path, database)  # (re-)register every silver table
"""

from pipelines.silver.job import (
    SCHEMA_CONFLICT,
    SilverBatch,
    SilverRun,
    add_parser,
    main,
    run,
    summarize,
)
from pipelines.silver.tables import register_tables

__all__ = [
    "SCHEMA_CONFLICT",
    "SilverBatch",
    "SilverRun",
    "add_parser",
    "main",
    "register_tables",
    "run",
    "summarize",
]
