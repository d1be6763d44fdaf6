"""Register the lakehouse's Delta tables in a catalog, by name, as external tables.

Every table protolake writes is registered as ``<database>.<name>``: ``name`` is its folder
under its layer (:func:`lakehouse.layout.table_name`), the database is the layer's
(:class:`CatalogDatabases`: ``bronze``, ``silver``, ``quarantine``, ``quality`` by default). The
entry is an external Delta table (``CREATE TABLE ... USING delta LOCATION ...``): the catalog
keeps the name and the location, the Delta log keeps the schema, so a column added by schema
evolution shows in the catalog at once, and dropping the entry deletes no data. Which catalog
the session talks to (a shared Hive metastore, or the session's own) is the session's
configuration (``pipelines.settings.clients.open_session``), not this module's.

Contract:

- Registering is idempotent: a table already registered at its location is left as it is.
- A name registered at another location raises :class:`CatalogLocationError` naming both
  locations; nothing is re-pointed silently (another lakehouse may own that name).
- ``comment`` and ``properties`` become the Delta table's description and table properties
  (``DESCRIBE TABLE EXTENDED`` shows them); they are written (Spark's one Delta metadata
  commit, or delta-rs's for a local table: one for the properties, one for the comment) only
  when they differ from what the table has.
- An empty database name means "do not register this layer".
- A metastore that does not answer (restarting, a network blip) is asked again with a bounded
  backoff (:data:`RETRY_DELAYS`, about 45 s in all: more than a metastore takes to restart);
  then :class:`CatalogUnavailableError` names its URI. Every step of a registration is
  idempotent, so a registration interrupted half-way is simply done again.
- A job that writes registers through :func:`register_or_defer`: the catalog is for readers,
  and a longer outage defers its registrations (a warning; none tried for
  :data:`DEFERRED_SECONDS`; the caller registers again later) instead of stopping its writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from lakehouse.driver_tables import set_description
from lakehouse.layout import BRONZE, QUALITY, QUARANTINE, SILVER, Layout, location_key, table_name
from lakehouse.tables import is_delta_table, list_delta_tables, table_metadata

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: Seconds to wait before each new attempt when the metastore does not answer.
RETRY_DELAYS: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 15.0, 15.0)

# What Hive's client and Spark say when the metastore cannot be reached or dropped the
# connection (as opposed to an answer such as "no such table", which is not retried).
_UNREACHABLE = (
    "TTransportException",
    "Could not connect to meta store",
    "Unable to instantiate org.apache.hadoop.hive",
    "Connection refused",
    "Connection reset",
    "Broken pipe",
    "SocketException",
    "SocketTimeoutException",
)


class CatalogLocationError(RuntimeError):
    """A table name is already registered at another location than the one being registered."""


class CatalogUnavailableError(RuntimeError):
    """The metastore did not answer through every retry of a registration."""


def metastore_unreachable(error: BaseException) -> bool:
    """True when ``error`` (from Spark's catalog) says the metastore could not be reached."""
    text = f"{type(error).__name__}: {error}"
    return any(marker in text for marker in _UNREACHABLE)


def metastore_uri(spark: SparkSession) -> str:
    """The metastore the session's catalog talks to, for messages."""
    uri = spark.conf.get("spark.hadoop.hive.metastore.uris", None)
    return uri or "the session's own catalog"


def with_retries(
    action: Callable[[], _T],
    where: str,
    what: str,
    delays: Sequence[float] = RETRY_DELAYS,
    sleep: Callable[[float], None] = time.sleep,
) -> _T:
    """``action()``, again after each of ``delays`` while the metastore does not answer.

    Raises:
        CatalogUnavailableError: the metastore ``where`` did not answer through every retry
            (chained to the last error).
        Exception: whatever else ``action`` raises, at once.
    """
    for attempt, delay in enumerate([*delays, None]):
        try:
            return action()
        except Exception as exc:
            if not metastore_unreachable(exc):
                raise
            if delay is None:
                raise CatalogUnavailableError(
                    f"the metastore {where} did not answer while {what} "
                    f"({attempt + 1} attempts over {sum(delays):.0f} s): is it running?"
                ) from exc
            log.warning(
                "catalog: the metastore %s does not answer (%s); %s again in %.0f s",
                where,
                type(exc).__name__,
                what,
                delay,
            )
            sleep(delay)
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class CatalogDatabases:
    """The database of each layer's tables; an empty name leaves that layer unregistered."""

    bronze: str = BRONZE
    silver: str = SILVER
    quarantine: str = QUARANTINE
    quality: str = QUALITY

    def of(self, layer: str) -> str:
        """The database of ``layer`` (one of ``lakehouse.layout.LAYERS``)."""
        return str(getattr(self, layer))


@dataclass(frozen=True)
class RegisteredTable:
    """One table of the catalog: its qualified name, layer and location."""

    name: str
    layer: str
    path: str


def quote(identifier: str) -> str:
    """``identifier`` as a back-quoted Spark SQL identifier."""
    return "`" + identifier.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """``text`` as a single-quoted Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def register_table(
    spark: SparkSession,
    database: str,
    path: str,
    *,
    comment: str = "",
    properties: Mapping[str, str] | None = None,
) -> str:
    """Register the Delta table at ``path`` as ``<database>.<folder name>``; return that name.

    Raises:
        CatalogLocationError: the name is registered at another location.
        CatalogUnavailableError: the metastore did not answer through every retry.
    """
    return with_retries(
        lambda: _register_table(spark, database, path, comment, properties or {}),
        metastore_uri(spark),
        f"registering {database}.{table_name(path)}",
    )


#: after the metastore did not answer through every retry, no registration is tried this long
DEFERRED_SECONDS = 300.0
_deferred_until = 0.0  # time.monotonic() before which registrations are deferred


def register_or_defer(
    spark: SparkSession,
    database: str,
    path: str,
    *,
    comment: str = "",
    properties: Mapping[str, str] | None = None,
) -> str | None:
    """:func:`register_table` for a job that writes: None, with a warning, when the metastore
    did not answer through every retry or did not within the last :data:`DEFERRED_SECONDS`
    (the caller registers the table again later; its writes go on). Any other error raises.

    Raises:
        CatalogLocationError: the name is registered at another location.
    """
    global _deferred_until
    if time.monotonic() < _deferred_until:
        return None
    try:
        return register_table(spark, database, path, comment=comment, properties=properties)
    except CatalogUnavailableError as exc:
        _deferred_until = time.monotonic() + DEFERRED_SECONDS
        log.warning(
            "%s; %s.%s is not registered now: registrations wait %.0f s, then are tried again "
            "(the job goes on writing)",
            exc,
            database,
            table_name(path),
            DEFERRED_SECONDS,
        )
        return None


def _register_table(
    spark: SparkSession, database: str, path: str, comment: str, properties: Mapping[str, str]
) -> str:
    name = table_name(path)
    qualified = f"{quote(database)}.{quote(name)}"
    if not spark.catalog.databaseExists(database):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(database)}")
    current = registered_location(spark, database, name)
    if current is not None:
        if not current or not same_location(current, path):
            gone = bool(current) and not is_delta_table(current, spark)
            raise CatalogLocationError(
                f"{database}.{name} is registered at {current or 'an unknown location'}"
                f"{' (no Delta table there any more)' if gone else ''}, not at "
                f"{path}: drop that entry (DROP TABLE {database}.{name}; external, no data is "
                "deleted) or configure another database for this lakehouse"
            )
    else:
        spark.sql(f"CREATE TABLE IF NOT EXISTS {qualified} USING delta LOCATION {sql_string(path)}")
    describe_table(spark, qualified, path, comment, properties)
    return f"{database}.{name}"


def describe_table(
    spark: SparkSession, qualified: str, path: str, comment: str, properties: Mapping[str, str]
) -> None:
    """Set the comment and properties of ``qualified`` (the table at ``path``) where they
    differ from what its Delta log holds: by delta-rs for a local table
    (``lakehouse.driver_tables``), else in one ``ALTER TABLE`` commit."""
    wanted = dict(properties)
    if comment:
        wanted["comment"] = comment
    if not wanted or set_description(path, comment, properties):
        return
    metadata = table_metadata(spark, path)
    have = dict(metadata.properties) if metadata is not None else {}
    have["comment"] = metadata.description if metadata is not None else ""
    changed = {k: v for k, v in wanted.items() if have.get(k) != v}
    if changed:
        pairs = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in sorted(changed.items()))
        spark.sql(f"ALTER TABLE {qualified} SET TBLPROPERTIES ({pairs})")


def registered_location(spark: SparkSession, database: str, name: str) -> str | None:
    """The location the catalog records for ``database.name`` ("" when it records none), or
    None when no such table is registered.

    Read from the session catalog's own record, without loading the table: Spark's
    ``tableExists`` and ``DESCRIBE`` load a Delta table, and fail on an entry whose location
    holds no table any more (a lakehouse moved or deleted), which is a conflict to name.
    """
    jvm: Any = spark._jvm  # type: ignore[attr-defined]
    catalog = spark._jsparkSession.sessionState().catalog()  # type: ignore[attr-defined]
    ident = jvm.org.apache.spark.sql.catalyst.TableIdentifier.apply(name, jvm.scala.Some(database))
    if not catalog.tableExists(ident):
        return None
    location = catalog.getTableMetadata(ident).storage().locationUri()
    if not location.isDefined():
        return ""
    # as Spark shows it (CatalogUtils.URIToString): decoded, "my lake", not "my%20lake"
    return str(jvm.org.apache.hadoop.fs.Path(location.get()).toString())


def same_location(a: str, b: str) -> bool:
    """True when two spellings of a location name one folder (``layout.location_key``)."""
    return location_key(a) == location_key(b)


def layer_tables(layout: Layout, layer: str, spark: SparkSession) -> list[str]:
    """The Delta tables of one layer, as paths."""
    if layer == QUARANTINE:
        return [layout.quarantine] if is_delta_table(layout.quarantine, spark) else []
    if layer == QUALITY:
        found = is_delta_table(layout.quality_results, spark)
        return [layout.quality_results] if found else []
    return list_delta_tables(layout.layer(layer), spark)


def register_lakehouse(
    spark: SparkSession, layout: Layout, databases: CatalogDatabases
) -> list[RegisteredTable]:
    """Register every Delta table of the lakehouse (for a new catalog, or a new session's).

    Comments and properties a job set are kept (they live in the Delta log); tables are only
    named here.

    Raises:
        CatalogLocationError: a name is registered at another location.
    """
    out = []
    for layer in (BRONZE, SILVER, QUARANTINE, QUALITY):
        database = databases.of(layer)
        if not database:
            continue
        for path in layer_tables(layout, layer, spark):
            out.append(RegisteredTable(register_table(spark, database, path), layer, path))
    return out
