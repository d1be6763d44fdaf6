"""The catalog names of what silver writes (``[catalog]``): each silver table, with the schema
versions and Kafka topics it holds in its comment and properties, and the quality results.

A silver table is registered once a run (with what an earlier run recorded), and again when a
schema version or a Kafka topic it did not hold arrives, with what its properties hold then
(another query of the job may write the same message type from another topic); nothing is
registered for a database named ``""``. A metastore that is down defers a registration to a
later batch (``lakehouse.catalog.register_or_defer``): silver goes on writing.
"""

from __future__ import annotations

import threading

from pyspark.sql import SparkSession

from lakehouse.catalog import CatalogDatabases, register_or_defer

from .plan import TablePlan
from .tables import describe_silver_table, registered_sources


class SilverRegistration:
    """Registers one silver query's tables in the catalog (see the module docstring).

    Args:
        spark: the job's session.
        databases: the databases to register in.
        lock: held while registering (concurrent queries share the catalog).
    """

    def __init__(
        self, spark: SparkSession, databases: CatalogDatabases, lock: threading.RLock
    ) -> None:
        self.spark = spark
        self.databases = databases
        self._lock = lock
        # per silver table, the (schema versions, Kafka topics) it was last registered with
        self._registered: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self._quality_registered = False

    def silver_table(self, plan: TablePlan, topics: list[str]) -> None:
        """Register the table of ``plan`` holding ``topics``, when it is new to this run or
        holds a version or a topic it was not registered with."""
        if not self.databases.silver:
            return
        first = plan.table not in self._registered
        if first:
            self._registered[plan.table] = registered_sources(self.spark, plan.path)
        versions = {r.version for r in plan.versions}
        known_versions, known_topics = self._registered[plan.table]
        if not first and versions <= set(known_versions) and set(topics) <= set(known_topics):
            return
        with self._lock:
            # read again: another query of this job may have registered the same table (its
            # message type on another topic) with what this one does not know
            now_versions, now_topics = registered_sources(self.spark, plan.path)
            all_versions = tuple(sorted({*versions, *known_versions, *now_versions}))
            all_topics = tuple(sorted({*topics, *known_topics, *now_topics}))
            comment, properties = describe_silver_table(
                plan.message_type, plan.versions, all_versions, all_topics
            )
            registered = register_or_defer(
                self.spark, self.databases.silver, plan.path, comment=comment, properties=properties
            )
        if registered is None:  # the metastore is down: a later batch registers it
            self._registered.pop(plan.table, None)
            return
        self._registered[plan.table] = (all_versions, all_topics)

    def creation_description(
        self, plan: TablePlan, topics: list[str]
    ) -> tuple[str, dict[str, str]]:
        """The comment and properties a new table of ``plan`` holding ``topics`` is created
        with: what :meth:`silver_table` registers it with, so that registering it changes
        nothing in its log; none without a silver database (nothing would keep them current)."""
        if not self.databases.silver:
            return "", {}
        versions = sorted({r.version for r in plan.versions})
        return describe_silver_table(plan.message_type, plan.versions, versions, topics)

    def quality_results(self, path: str) -> None:
        """Register the quality results table at ``path`` (once a run)."""
        if not self.databases.quality or self._quality_registered:
            return
        with self._lock:
            registered = register_or_defer(self.spark, self.databases.quality, path)
        self._quality_registered = registered is not None
