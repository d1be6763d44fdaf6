"""Expectations run through Great Expectations' Spark engine, one batch at a time.

:class:`GreatExpectationsRunner` validates a batch against a suite less the rules it is told to
leave out (the compiled ones, the ones whose columns are missing), adds GE's sample of
unexpected values to each failure (a second GE run of that expectation: GE's counts-only
result leaves it out, and fetching it for every expectation costs one Spark job each), and
finds a failed rule's rows by GE's ``unexpected_index_list`` keyed by the Kafka coordinates.

GE's Spark execution engine keeps the active batch as state shared by every asset of a
datasource, and its context is not thread-safe: every call holds :attr:`lock`.

Raises :class:`quality.rules.QualityConfigError` when GE raised while evaluating a rule.
"""

from __future__ import annotations

import threading
from copy import copy
from typing import Any

from great_expectations.core import ExpectationSuite
from great_expectations.core.batch_definition import BatchDefinition
from great_expectations.core.expectation_validation_result import (
    ExpectationSuiteValidationResult,
    ExpectationValidationResult,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import StructType

from quality.rules import KAFKA_KEY, ExpectationRule, QualityConfigError
from quality.suites import Suite

DATASOURCE = "protolake_silver"
SAMPLE_SIZE = 5  # unexpected values kept for a failed expectation (results, Data Docs)
# GE's BASIC result (verdict and counts) without its sample of unexpected values: GE fetches
# that sample with one Spark job per row-level expectation, passed or not; run() asks GE for
# it again for the failed expectations only.
COUNTS_ONLY = {"result_format": "BASIC", "partial_unexpected_count": 0}
WITH_SAMPLE = {"result_format": "BASIC", "partial_unexpected_count": SAMPLE_SIZE}


class GreatExpectationsRunner:
    """Runs rules through one GE datasource (one dataframe asset per table); see the module."""

    def __init__(self, context: Any, spark: SparkSession) -> None:
        self._spark = spark
        self.lock = threading.RLock()
        # persist=False: GE's default persists every batch it loads (each run() and each
        # flag_by_keys() call) and never unpersists it; a long-running stream then fills the
        # executors' memory and disk with every batch it ever checked. The caller keeps the
        # batch computed when computing it twice is expensive (silver keeps its decoded rows,
        # lakehouse.materialized).
        self._datasource = context.data_sources.add_or_update_spark(name=DATASOURCE, persist=False)
        self._batch_definitions: dict[str, BatchDefinition] = {}

    def run(
        self,
        df: DataFrame,
        table: str,
        entry: Suite,
        left_out: frozenset[str],
        parameters: dict[str, Any],
    ) -> tuple[Any, list[tuple[ExpectationRule, ExpectationValidationResult]]]:
        """GE's batch of ``df`` and its verdicts on the rules not ``left_out`` (suite order)."""
        with self.lock:
            batch = self._batch_definition(table).get_batch(batch_parameters={"dataframe": df})
            suite_result = batch.validate(
                self._runnable_suite(entry, left_out),
                result_format=COUNTS_ONLY,
                expectation_parameters=parameters,
            )
            verdicts = self._match_results(entry, suite_result, left_out)
            for rule, verdict in verdicts:
                if not verdict.success and verdict.result.get("unexpected_count"):
                    # the sample COUNTS_ONLY left out, for the failures only
                    sample = batch.validate(
                        rule.to_expectation(),
                        result_format=WITH_SAMPLE,
                        expectation_parameters=parameters,
                    )
                    verdict.result["partial_unexpected_list"] = sample.result.get(
                        "partial_unexpected_list", []
                    )
            return batch, verdicts

    def _runnable_suite(self, entry: Suite, left_out: frozenset[str]) -> ExpectationSuite:
        """The suite, or a copy without the ``left_out`` rules (by expectation id)."""
        if not left_out:
            return entry.suite
        found = entry.partial.get(left_out)
        if found is None:
            kept = [
                e
                for e in entry.suite.expectations
                if entry.by_id[str(e.id)].expectation_id not in left_out
            ]
            # not stored: Data Docs show the full suite. GE binds only id-less copies to a
            # suite; the copies get the ids back so that their results find their rules.
            found = ExpectationSuite(name=entry.suite.name, expectations=[copy(e) for e in kept])
            for bound, original in zip(found.expectations, kept, strict=True):
                bound.id = original.id
            entry.partial[left_out] = found
        return found

    def _match_results(
        self,
        entry: Suite,
        suite_result: ExpectationSuiteValidationResult,
        left_out: frozenset[str] = frozenset(),
    ) -> list[tuple[ExpectationRule, ExpectationValidationResult]]:
        by_rule: dict[str, ExpectationValidationResult] = {}
        for v in suite_result.results:
            config = v.expectation_config
            rule = entry.by_id.get(str(config.id)) if config is not None else None
            if rule is None:
                raise RuntimeError(f"Great Expectations returned a result for no rule: {config}")
            message = _exception_message(v.exception_info)
            if message is not None:
                raise QualityConfigError(f"{rule.describe()}: Great Expectations raised: {message}")
            by_rule[rule.expectation_id] = v
        return [
            (rule, by_rule[rule.expectation_id])
            for rule in entry.rules
            if rule.expectation_id not in left_out
        ]

    def flag_by_keys(
        self,
        df: DataFrame,
        batch: Any,
        rule: ExpectationRule,
        parameters: dict[str, Any],
        name: str,
    ) -> DataFrame:
        """Flag the rows GE lists as unexpected, found by their Kafka coordinates."""
        with self.lock:
            verdict = batch.validate(
                rule.to_expectation(),
                result_format={
                    "result_format": "COMPLETE",
                    "unexpected_index_column_names": list(KAFKA_KEY),
                    "return_unexpected_index_query": False,
                },
                expectation_parameters=parameters,
            )
        keys = {
            tuple(item[k] for k in KAFKA_KEY)
            for item in verdict.result.get("unexpected_index_list") or []
        }
        key_schema = StructType([df.schema[k] for k in KAFKA_KEY])
        key_df = self._spark.createDataFrame(sorted(keys), schema=key_schema).withColumn(
            name, F.lit(True)
        )
        joined = df.join(F.broadcast(key_df), on=list(KAFKA_KEY), how="left")
        return joined.withColumn(name, F.coalesce(F.col(name), F.lit(False)))

    # -- suites, assets, docs --------------------------------------------------------------

    def _batch_definition(self, table: str) -> BatchDefinition:
        found = self._batch_definitions.get(table)
        if found is not None:
            return found
        try:
            asset = self._datasource.get_asset(table)
        except LookupError:
            asset = self._datasource.add_dataframe_asset(name=table)
        try:
            definition = asset.get_batch_definition("whole_batch")
        except (KeyError, LookupError):
            definition = asset.add_batch_definition_whole_dataframe("whole_batch")
        self._batch_definitions[table] = definition
        return definition


def _exception_message(info: Any) -> str | None:
    """GE reports an exception either flat or keyed by the metric that raised it."""
    if not isinstance(info, dict):
        return None
    found = (
        [info] if "raised_exception" in info else [v for v in info.values() if isinstance(v, dict)]
    )
    messages = [
        " ".join(str(e.get("exception_message")).split())
        for e in found
        if e.get("raised_exception")
    ]
    return "; ".join(messages) if messages else None
