"""A local Delta table's metadata commits without Spark: creating the table, and changing its
comment and properties, by delta-rs (``deltalake``) in the driver.

Spark's ``CREATE TABLE`` and ``ALTER TABLE ... SET TBLPROPERTIES`` are SQL commands: parsed,
planned and committed through the JVM, seconds each while a streaming job's queries share the
driver; delta-rs commits the same actions in milliseconds. They go this way only where the
result is the table Spark would have made (else the caller's Spark command runs, as before):

- the table is in a local folder (:func:`lakehouse.layout.local_path`): on an object store
  Spark's file systems and log stores keep the commits (as ``lakehouse.driver_append``);
- creating: every table default of the session (``spark.databricks.delta.properties.
  defaults.<key>``, which Spark applies to the tables it creates) is one of
  :data:`PLAIN_DEFAULTS`, settings that need no table feature, and the schema has no type
  that needs one (``timestamp_ntz``, ``variant``): delta-rs then writes protocol 1/2, as Spark;
- changing or reading a table: its protocol is reader 1, writer 1 or 2 (:func:`plain_table`).
  A table of table features (deletion vectors, column mapping, ...) is Spark's: delta-rs
  would add features of its own to its protocol, and a column-mapped schema reads otherwise.

The schema is Spark's, as JSON: Delta's ``schemaString`` is that JSON, column comments
(field metadata) included, and :func:`local_schema` reads it back the same way. Every reader,
Spark's included, reads the one Delta log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lakehouse.layout import local_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql import types as T  # noqa: N812

log = logging.getLogger(__name__)

#: the prefix of the session's table defaults, each ``delta.<key>`` of a table Spark creates
DEFAULTS_PREFIX = "spark.databricks.delta.properties.defaults."
#: table defaults that need no table feature (any other one: Spark creates the table)
PLAIN_DEFAULTS = frozenset(
    {
        "checkpointInterval",
        "logRetentionDuration",
        "deletedFileRetentionDuration",
        "checkpointRetentionDuration",
        "dataSkippingNumIndexedCols",
        "dataSkippingStatsColumns",
    }
)
#: schema types of the Delta protocol's table features (a table of them: Spark creates it)
FEATURE_TYPES = ('"timestamp_ntz"', '"variant"')


class SparkOnlyTableError(ValueError):
    """delta-rs cannot read this table as Spark does (see the module docstring): Spark must."""


def plain_table(path: str) -> Any:
    """The delta-rs table at local ``path`` when its protocol is reader 1, writer 1 or 2;
    None when there is no table there.

    Raises:
        SparkOnlyTableError: ``path`` is not local, the table has another protocol, or
            delta-rs cannot read it.
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    local = local_path(path)
    if local is None:
        raise SparkOnlyTableError(f"{path}: not a local table")
    try:
        if not DeltaTable.is_deltatable(str(local)):
            return None
        table = DeltaTable(str(local))
        protocol = table.protocol()
    except DeltaError as exc:
        raise SparkOnlyTableError(f"{path}: delta-rs cannot read it ({exc})") from exc
    if not has_plain_protocol(table):
        raise SparkOnlyTableError(
            f"{path}: protocol {protocol.min_reader_version}/{protocol.min_writer_version}"
        )
    return table


def has_plain_protocol(table: Any) -> bool:
    """Whether delta-rs table ``table`` has protocol reader 1, writer 1 or 2 (no table
    feature: delta-rs changes it as Spark would)."""
    protocol = table.protocol()
    return bool(protocol.min_reader_version == 1 and protocol.min_writer_version <= 2)


def table_defaults(spark: SparkSession) -> dict[str, str] | None:
    """The table properties Spark would give a table it creates in ``spark``'s session, or
    None when one of them needs a table feature (not in :data:`PLAIN_DEFAULTS`)."""
    out = {}
    for key, value in spark.conf.getAll.items():
        if not key.startswith(DEFAULTS_PREFIX):
            continue
        name = key[len(DEFAULTS_PREFIX) :]
        if name not in PLAIN_DEFAULTS:
            return None
        out[f"delta.{name}"] = value
    return out


def create_table(
    spark: SparkSession,
    path: str,
    schema: T.StructType,
    *,
    description: str = "",
    properties: Mapping[str, str] | None = None,
) -> bool:
    """Create the local Delta table at ``path`` (``schema``, ``description`` and
    ``properties`` besides the session's table defaults) with delta-rs, unless it exists.

    Returns:
        False, with nothing written, when Spark must create it (see the module docstring);
        True when the table is there, made here or by a concurrent writer.
    """
    from deltalake import CommitProperties, DeltaTable, Schema
    from deltalake.exceptions import DeltaError

    local = local_path(path)
    text = schema.json()
    if local is None or any(t in text for t in FEATURE_TYPES):
        return False
    defaults = table_defaults(spark)
    if defaults is None:
        return False
    if DeltaTable.is_deltatable(str(local)):
        return True
    try:
        DeltaTable.create(
            str(local),
            Schema.from_json(text),
            mode="ignore",
            description=description or None,
            configuration={**defaults, **(properties or {})},
            raise_if_key_not_exists=False,  # protolake.* properties are the project's own
            # a creation that lost the race for version 0 fails: retried, delta-rs would
            # commit it again as version 1, a second table id over the winner's table
            commit_properties=CommitProperties(max_commit_retries=0),
        )
    except DeltaError:
        # a concurrent writer's first commit won the race: its table is the table
        if not DeltaTable.is_deltatable(str(local)):
            raise
    log.debug("%s: created by delta-rs", path)
    return True


def set_description(path: str, description: str, properties: Mapping[str, str]) -> bool:
    """Set the comment (``description``, when not empty) and ``properties`` of the local
    Delta table at ``path`` with delta-rs, each where it differs from the table's: one commit
    for the properties, one for the comment. False, with nothing written, when Spark's
    ``ALTER TABLE`` must (not a local table, none there, not :func:`plain_table`)."""
    try:
        table = plain_table(path)
    except SparkOnlyTableError:
        return False
    if table is None:
        return False
    metadata = table.metadata()
    changed = {k: v for k, v in properties.items() if metadata.configuration.get(k) != v}
    if changed:
        table.alter.set_table_properties(dict(changed), raise_if_not_exists=False)
    if description and (metadata.description or "") != description:
        table.alter.set_table_description(description)
    return True


def local_schema(path: str) -> T.StructType | None:
    """The Spark schema of the local Delta table at ``path``, read from its log by delta-rs
    (milliseconds, where Spark's read of the log takes a job's planning); None when there is no
    table there.

    Raises:
        SparkOnlyTableError: not a :func:`plain_table` (Spark reads the schema then).
    """
    import json

    from pyspark.sql import types as T  # noqa: N812

    table = plain_table(path)
    if table is None:
        return None
    return T.StructType.fromJson(json.loads(table.schema().to_json()))
