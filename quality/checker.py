"""Validate silver micro-batches against Great Expectations suites; split them into kept and failed.

``QualityChecker(spark, lakehouse_path, rules)`` opens one Great Expectations file context
(created once, reused for every batch), registers one Spark dataframe asset per silver table
and builds one expectation suite per message type (:mod:`quality.suites`: where the context
lives, what a suite holds).

``validate(df, message_type=..., table=..., batch_id=..., reference_time=...)`` judges the batch
by the suite and returns a :class:`QualityOutcome`. ``reference_time`` is the batch's "now" (the
Kafka timestamp bound of :func:`quality.rules.default_rules` is ``reference_time + 1 day``): a
caller that may run the same batch again passes a value derived from the batch, never the wall
clock, so that the split below is the same on every attempt (``quality.rules``).

How a batch is judged:

- compiled expectations (:data:`quality.compiled.COMPILED_EXPECTATIONS`, listed below) are
  evaluated together in ONE Spark aggregation over the batch (counts, unexpected samples,
  observed values), and GE's own ``_validate`` of each expectation turns those metrics into its
  ``ExpectationValidationResult``; no lock: concurrent tables and queries run side by side;
- every other expectation (and a compiled type whose arguments or column types the compiled
  form does not model, e.g. a ``row_condition``, a regex on a number column) runs through
  Great Expectations' Spark engine, under a process-wide lock (GE keeps the active batch as
  shared state), with a second GE run of each failed one for its unexpected sample.

The compiled and the GE-run types are listed in :mod:`quality`'s docstring.

``validate_arrow(rows, schema, message_type=..., table=..., batch_id=..., reference_time=...)``
judges a batch the driver holds as a ``pyarrow.Table`` (of Spark ``schema``) without Spark: the
compiled rules evaluated in the process (:mod:`quality.arrow_checks`), judged by the same GE
``_validate``; it returns an :class:`ArrowOutcome` with the results :meth:`validate` would give
(``validated_at`` aside, and the uniqueness rules' sample, below), ``fail_batch``, ``failed`` (a
boolean mask of the rows quarantine rules move out) and ``reasons`` (one per failed row, in row
order), remembers the result for Data Docs and logs skipped rules as :meth:`validate` does. It
returns None, having done nothing, when a rule the batch does not skip is not compiled (GE
would run it) or not answerable in Arrow with certainty of Spark's answer (an unmodelled column
type or comparison, a regex outside the shared subset, NaN / -0.0 in a compared float column,
...): the caller then calls :meth:`validate` on a DataFrame. The one difference: the sample of
duplicates of ``expect_column_values_to_be_unique`` and ``expect_compound_columns_to_be_unique``
(GE's ``partial_unexpected_list``, so a failed one's ``observed_value`` text, also in Data Docs)
is the first ones in row order, Spark's in the order its shuffle merges partitions: the same
values in another order, or with more than 5 duplicate rows maybe other duplicates. Counts,
verdicts, ``fail_batch``, the rows quarantined and their reasons are the same.

The outcome:

- ``passed``: the rows that stay in silver: all of them unless a ``quarantine`` rule failed;
- ``failed``: the rows unexpected by a failed ``quarantine`` rule, with ``reason_code =
  "DQ_FAILED"``, ``stage = "quality"`` and ``reason`` naming every such rule, e.g.
  ``expect_column_values_to_not_be_null(column=order_id) failed: 3 of 100 rows unexpected``;
- ``passed`` and ``failed`` partition the input: every row is in exactly one of them;
- ``results``: one :class:`QualityResult` per expectation (GE's ``BASIC`` result: verdict,
  counts, observed value, and for a failure a sample of up to 5 unexpected values);
- ``fail_batch``: a ``fail`` rule failed; the caller raises :class:`QualityFailed` and commits
  nothing (it may write the results first: :meth:`write_results` is idempotent).

Rows of a compiled rule are found by the same :mod:`quality.predicates` expression that counted
them; rows of a GE-run rule by GE's ``unexpected_index_list`` keyed by the Kafka coordinates
``(_kafka_topic, _kafka_partition, _kafka_offset)``. ``passed`` and ``failed`` are lazy
DataFrames over the input, which is read again by each write: the caller should persist the
batch first when computing it is expensive.

A rule whose column the batch lacks (e.g. a field a later schema version adds, while the
table has only seen earlier versions) is skipped: its result has ``success = False`` and
``observed_value = "skipped: column(s) ... not in the batch"``, a warning is logged, no row
moves; the batch fails only when the rule's policy is ``fail`` (``fail_batch``).

Raises :class:`QualityConfigError` when Great Expectations raises while evaluating a rule
(e.g. a regex on a number column), and at start-up when a configured regular expression is
not valid for Java's ``java.util.regex`` (Spark's engine).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from great_expectations.core.expectation_validation_result import (
    ExpectationSuiteValidationResult,
    ExpectationValidationResult,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import StructType

from lakehouse.layout import Layout
from quality.arrow_checks import evaluate_arrow
from quality.compiled import CompiledRule, compile_rule, evaluate, validation_result
from quality.docs import DataDocs, publish_folder, suite_result
from quality.ge_run import DATASOURCE, SAMPLE_SIZE, WITH_SAMPLE, GreatExpectationsRunner
from quality.outcomes import ArrowOutcome, QualityFailed, QualityOutcome
from quality.predicates import unexpected_predicate
from quality.results import QualityResult, write_results
from quality.rules import (
    TIMESTAMP_MAX_PARAMETER,
    TIMESTAMP_MAX_SLACK,
    ExpectationRule,
    check_java_regexes,
    missing_columns,
)
from quality.split import split_batch, split_masks, with_reason
from quality.suites import Suite, Suites, local_layout, open_context
from quality.verdicts import (
    Judged,
    Verdicts,
    conclude,
    result_row,
    rows_failed,
    skipped_result,
    warn_skipped,
)

# the outcomes of validate and validate_arrow, and the error a fail rule raises, named here too
__all__ = ["ArrowOutcome", "QualityChecker", "QualityFailed", "QualityOutcome"]


@dataclass
class _Run:
    """One validation's suite, the rules it skips (columns missing), its time and parameters."""

    entry: Suite
    missing: dict[str, list[str]]
    validated_at: datetime
    parameters: dict[str, Any]

    @property
    def skipped(self) -> frozenset[str]:
        return frozenset(self.missing)


class QualityChecker:
    """One Great Expectations context and one suite per message type, reused for every batch.

    Thread-safe: compiled rules of concurrent streaming queries run side by side; the rules
    Great Expectations runs take turns (one lock, held only while GE runs).
    """

    def __init__(
        self, spark: SparkSession, lakehouse_path: str, rules: list[ExpectationRule]
    ) -> None:
        self._spark = spark
        self._layout = Layout(lakehouse_path)
        self._rules = list(rules)
        local = local_layout(self._layout)
        check_java_regexes(spark, self._rules)
        context = open_context(local.local_quality_dir())
        self._docs = DataDocs(context, local.local_quality_docs())
        self.docs_dir = self._docs.docs_dir
        self._ge = GreatExpectationsRunner(context, spark)
        self._latest: dict[str, tuple[ExpectationSuiteValidationResult, str, int, datetime]] = {}
        # GE's context is not thread-safe: GE runs, suite creation and Data Docs take turns.
        # Compiled rules never take this lock.
        self._lock = self._ge.lock
        self._suites = Suites(context, self._rules, self._lock)

    @property
    def docs_index(self) -> Path:
        """The Data Docs entry page (exists after :meth:`build_data_docs`)."""
        return self._docs.index

    def suite_names(self) -> list[str]:
        return self._suites.names()

    def rules_for(self, message_type: str) -> list[ExpectationRule]:
        return list(self._suites.get(message_type).rules)

    # -- validation ------------------------------------------------------------------------

    def validate(
        self,
        df: DataFrame,
        *,
        message_type: str,
        table: str,
        batch_id: int,
        reference_time: datetime | None = None,
    ) -> QualityOutcome:
        """Validate one batch of one silver table (see the module docstring).

        Args:
            reference_time: the batch's "now" for time-relative rules; the same value on every
                attempt of the batch (silver: its bronze rows' latest ``_ingested_at``). None:
                the wall clock, for callers that never validate a batch twice.

        Raises:
            QualityConfigError: GE raised while evaluating a rule.
        """
        run = self._start(df.schema, message_type, reference_time)
        warn_skipped(run.entry.rules, run.missing, table, batch_id)
        verdicts = self._judge(df, run, table)
        judged = conclude(run.entry.rules, run.missing, verdicts)
        if judged.to_quarantine:
            passed, failed, rows_quarantined = self._split(
                df, verdicts, judged.to_quarantine, run.parameters
            )
        else:
            passed, failed, rows_quarantined = df, with_reason(df.where(F.lit(False)), F.lit("")), 0
        results = self._finish(
            run, judged, verdicts, message_type, table, batch_id, rows_quarantined
        )
        return QualityOutcome(
            table=table,
            message_type=message_type,
            batch_id=int(batch_id),
            passed=passed,
            failed=failed,
            results=results,
            fail_batch=judged.fail_batch,
            rows_checked=judged.rows_checked,
            rows_quarantined=rows_quarantined,
        )

    def validate_arrow(
        self,
        rows: pa.Table,
        schema: StructType,
        *,
        message_type: str,
        table: str,
        batch_id: int,
        reference_time: datetime | None = None,
    ) -> ArrowOutcome | None:
        """:meth:`validate` of a batch held as Arrow rows of Spark ``schema``, without Spark.

        The results of :meth:`validate` of ``spark.createDataFrame(rows, schema)`` but for
        ``validated_at`` and the uniqueness rules' sample of duplicates (their ``observed_value``
        when failed: the first duplicates in row order, Spark's in shuffle order, so maybe in
        another order or, beyond 5 duplicate rows, other ones; see the module docstring), with
        the same verdicts, ``fail_batch`` and quarantined rows (``failed``: a mask, ``reasons``:
        their reasons in row order). None when some rule the batch does not skip is not
        compiled (GE runs it) or not answerable in Arrow (:mod:`quality.arrow_checks`): the
        caller then calls :meth:`validate`.
        """
        run = self._start(schema, message_type, reference_time)
        compiled = _compile(run, schema, columns=False)
        if len(compiled) + len(run.missing) < len(run.entry.rules):
            return None
        checks = evaluate_arrow(rows, schema, list(compiled.values()), SAMPLE_SIZE)
        if checks is None:
            return None
        verdicts = Verdicts(compiled=compiled, found=checks.found)
        _judge_compiled(verdicts, run.entry, table)
        warn_skipped(run.entry.rules, run.missing, table, batch_id)
        judged = conclude(run.entry.rules, run.missing, verdicts)
        masks = [checks.masks[compiled[r.expectation_id].flag] for r, _ in judged.to_quarantine]
        failed, reasons = split_masks(rows.num_rows, judged.to_quarantine, masks)
        results = self._finish(run, judged, verdicts, message_type, table, batch_id, len(reasons))
        return ArrowOutcome(
            table=table,
            message_type=message_type,
            batch_id=int(batch_id),
            results=results,
            fail_batch=judged.fail_batch,
            failed=failed,
            reasons=reasons,
            rows_checked=judged.rows_checked,
            rows_quarantined=len(reasons),
        )

    def _start(
        self, schema: StructType, message_type: str, reference_time: datetime | None
    ) -> _Run:
        entry = self._suites.get(message_type)
        validated_at = datetime.now(UTC)
        reference = reference_time if reference_time is not None else validated_at
        return _Run(
            entry=entry,
            missing=missing_columns(entry.rules, schema),
            validated_at=validated_at,
            parameters={TIMESTAMP_MAX_PARAMETER: reference + TIMESTAMP_MAX_SLACK},
        )

    def _finish(
        self,
        run: _Run,
        judged: Judged,
        verdicts: Verdicts,
        message_type: str,
        table: str,
        batch_id: int,
        rows_quarantined: int,
    ) -> list[QualityResult]:
        """Remember the suite result (Data Docs) and return one result row per rule."""
        batch_name = f"{DATASOURCE}-{table}"
        shown = [
            verdicts.by_id.get(rule.expectation_id)
            or skipped_result(
                run.entry.expectation_of[rule.expectation_id],
                run.missing[rule.expectation_id],
                batch_name,
            )
            for rule in run.entry.rules
        ]
        self._remember(message_type, table, batch_id, shown, run.validated_at)
        template = QualityResult(
            batch_id=int(batch_id),
            table=table,
            message_type=message_type,
            expectation="",
            expectation_type="",
            policy="",
            success=False,
            element_count=None,
            unexpected_count=None,
            observed_value=None,
            validated_at=run.validated_at,
            rows_checked=judged.rows_checked,
            rows_quarantined=rows_quarantined,
        )
        return [result_row(template, r, verdicts.by_id, run.missing) for r in run.entry.rules]

    def _remember(
        self,
        message_type: str,
        table: str,
        batch_id: int,
        verdicts: list[ExpectationValidationResult],
        validated_at: datetime,
    ) -> None:
        """Keep the type's latest suite result, which Data Docs render."""
        result = suite_result(
            message_type, verdicts, datasource=DATASOURCE, asset=table, loaded_at=validated_at
        )
        self._latest[message_type] = (result, table, int(batch_id), validated_at)

    def _judge(self, df: DataFrame, run: _Run, table: str) -> Verdicts:
        """Every runnable rule's GE result: compiled ones in one aggregation, the rest by GE."""
        verdicts = Verdicts(compiled=_compile(run, df.schema))
        if verdicts.compiled:
            _, verdicts.found = evaluate(df, list(verdicts.compiled.values()), SAMPLE_SIZE)
            _judge_compiled(verdicts, run.entry, table)
        not_by_ge = run.skipped | frozenset(verdicts.compiled)
        if len(not_by_ge) < len(run.entry.rules):
            verdicts.ge_batch, ran = self._ge.run(df, table, run.entry, not_by_ge, run.parameters)
            verdicts.by_id.update((rule.expectation_id, v) for rule, v in ran)
        return verdicts

    def _split(
        self,
        df: DataFrame,
        verdicts: Verdicts,
        failing: list[tuple[ExpectationRule, ExpectationValidationResult]],
        parameters: dict[str, Any],
    ) -> tuple[DataFrame, DataFrame, int]:
        """(passed, failed, rows failed): a compiled rule's rows are flagged by the predicate
        that counted them, a GE-run rule's by GE's list of their Kafka coordinates."""

        def flag(flagged: DataFrame, rule: ExpectationRule, name: str) -> DataFrame:
            if rule.expectation_id in verdicts.compiled:
                predicate = unexpected_predicate(rule, parameters)
                if predicate is not None:
                    return flagged.withColumn(name, F.coalesce(predicate, F.lit(False)))
            return self._ge.flag_by_keys(flagged, verdicts.ge_batch, rule, parameters, name)

        return split_batch(df, failing, flag, rows_failed(verdicts, failing))

    def build_data_docs(self) -> Path:
        """Render every suite and the latest result of each under ``<lakehouse>/quality/docs``.

        Only the latest validation of each suite is kept in GE's store (older ones are removed),
        so the index lists one result per suite. Returns the path of the local ``index.html``.
        Great Expectations renders into a local folder; for an object-store lakehouse that
        folder is then copied to ``<lakehouse>/quality/docs`` (:func:`publish_folder`).
        """
        with self._lock:
            index = self._docs.build(dict(self._latest))
            if not self._layout.is_local:
                publish_folder(self._spark, self._docs.docs_dir, self._layout.quality_docs)
            return index

    # -- results -----------------------------------------------------------------------------

    def write_results(self, results: list[QualityResult], batch_id: int, source: str = "") -> int:
        """Store results in ``<lakehouse>/quality/results``, idempotently per (source, batch,
        table)."""
        return write_results(self._spark, self._layout.root, results, batch_id, source)

    @property
    def results_path(self) -> str:
        return self._layout.quality_results


def _compile(run: _Run, schema: StructType, *, columns: bool = True) -> dict[str, CompiledRule]:
    """The rules of the run (those not skipped) the compiled form models, by expectation id
    (``columns=False``: without their Spark columns, for :mod:`quality.arrow_checks`)."""
    out: dict[str, CompiledRule] = {}
    for rule in run.entry.rules:
        if rule.expectation_id not in run.skipped:
            compiled = compile_rule(rule, schema, run.parameters, columns=columns)
            if compiled is not None:
                out[rule.expectation_id] = compiled
    return out


def _judge_compiled(verdicts: Verdicts, entry: Suite, table: str) -> None:
    """GE's verdict on each compiled rule's metrics (filled by the evaluation), into by_id."""
    for expectation_id, compiled in verdicts.compiled.items():
        v = validation_result(
            compiled, entry.expectation_of[expectation_id], WITH_SAMPLE, f"{DATASOURCE}-{table}"
        )
        if v.success:  # as GE's COUNTS_ONLY run: a sample for failures only
            v.result["partial_unexpected_list"] = []
        verdicts.by_id[expectation_id] = v
