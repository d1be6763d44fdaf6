"""Validate silver micro-batches with Great Expectations and split them into kept and failed rows.

``QualityChecker(spark, lakehouse_path, rules)`` opens one Great Expectations file context under
``<lakehouse>/quality/gx`` (created once, reused for every batch), registers one Spark dataframe
asset per silver table and builds one expectation suite per message type: the defaults of
:func:`quality.rules.default_rules` plus the configured rules (suites are code: rebuilt at every
start, the stored JSON is only what Data Docs render).

``validate(df, message_type=..., table=..., batch_id=..., reference_time=...)`` runs the suite on
the batch (GE's ``BASIC`` result format: verdict and counts) and returns a
:class:`QualityOutcome`. ``reference_time`` is the batch's "now" (the Kafka timestamp bound of
:func:`quality.rules.default_rules` is ``reference_time + 1 day``): a caller that may run the same
batch again passes a value derived from the batch, never the wall clock, so that the split below
is the same on every attempt (``quality.rules``).

- ``passed``: the rows that stay in silver: all of them unless a ``quarantine`` rule failed;
- ``failed``: the rows unexpected by a failed ``quarantine`` rule, with ``reason_code =
  "DQ_FAILED"``, ``stage = "quality"`` and ``reason`` naming every such rule, e.g.
  ``expect_column_values_to_not_be_null(column=order_id) failed: 3 of 100 rows unexpected``;
- ``passed`` and ``failed`` partition the input: every row is in exactly one of them;
- ``results``: one :class:`QualityResult` per expectation;
- ``fail_batch``: a ``fail`` rule failed; the caller raises :class:`QualityFailed` and commits
  nothing (it may write the results first: :meth:`write_results` is idempotent).

Rows are found by :mod:`quality.predicates` (Spark conditions equal to GE's), checked against
GE's unexpected counts; otherwise by GE's ``unexpected_index_list`` keyed by the Kafka
coordinates ``(_kafka_topic, _kafka_partition, _kafka_offset)``. ``passed`` and ``failed`` are
lazy DataFrames over the input, which is read several times (GE's metrics, then each write):
the caller should persist the batch first when computing it is expensive.

A rule whose column the batch lacks (e.g. a field a later schema version adds, while the
table has only seen earlier versions) is skipped: its result has ``success = False`` and
``observed_value = "skipped: column(s) ... not in the batch"``, a warning is logged, no row
moves; the batch fails only when the rule's policy is ``fail`` (``fail_batch``).

Raises :class:`QualityConfigError` when Great Expectations raises while evaluating a rule
(e.g. a regex on a number column), and at start-up when a configured regular expression is
not valid for Java's ``java.util.regex`` (Spark's engine). Great Expectations keeps its
context (and Data Docs) on the local disk: under ``<lakehouse>/quality`` for a local lakehouse
(or ``file://`` URI), in a local temporary folder otherwise (the results table is still in the
lakehouse).
"""

from __future__ import annotations

import html
import logging
import re
import shutil
import tempfile
import threading
from copy import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import great_expectations as gx
from great_expectations.core import ExpectationSuite
from great_expectations.core.batch_definition import BatchDefinition
from great_expectations.core.expectation_validation_result import (
    ExpectationSuiteValidationResult,
    ExpectationValidationResult,
)
from great_expectations.core.run_identifier import RunIdentifier
from great_expectations.data_context.types.base import ProgressBarsConfig
from great_expectations.data_context.types.resource_identifiers import (
    ExpectationSuiteIdentifier,
    ValidationResultIdentifier,
)
from great_expectations.expectations.expectation import Expectation
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import StructType

from lakehouse.layout import Layout
from quality.predicates import unexpected_predicate
from quality.results import QualityResult, format_observed, write_results
from quality.rules import (
    KAFKA_KEY,
    TIMESTAMP_MAX_PARAMETER,
    TIMESTAMP_MAX_SLACK,
    ExpectationRule,
    QualityConfigError,
    format_expectation_id,
    java_regex_error,
    suite_rules,
)

log = logging.getLogger(__name__)

REASON_CODE = "DQ_FAILED"
STAGE = "quality"
DOCS_SITE = "protolake"
DATASOURCE = "protolake_silver"
_FLAG = "__dq_flag_{}"
OVERVIEW_ID = "protolake-overview"
SKIPPED = "skipped"  # observed_value prefix of a rule whose columns a batch lacks
# GE's BASIC result (verdict and counts) without its sample of unexpected values: GE fetches
# that sample with one Spark job per row-level expectation, passed or not (about two thirds
# of a validation's jobs); validate() asks for it again for the failed expectations only.
COUNTS_ONLY = {"result_format": "BASIC", "partial_unexpected_count": 0}


class QualityFailed(RuntimeError):  # noqa: N818  (name fixed by the silver contract)
    """A ``fail``-policy expectation failed: the batch must not be committed."""

    def __init__(self, outcome: QualityOutcome) -> None:
        self.outcome = outcome
        failed = [r.expectation for r in outcome.results if r.policy == "fail" and not r.success]
        super().__init__(
            f"quality check failed for {outcome.table} batch {outcome.batch_id}: "
            + "; ".join(failed)
        )


@dataclass
class QualityOutcome:
    """What :meth:`QualityChecker.validate` found in one batch (see the module docstring)."""

    table: str
    message_type: str
    batch_id: int
    passed: DataFrame
    failed: DataFrame
    results: list[QualityResult]
    fail_batch: bool
    rows_checked: int | None = None
    rows_quarantined: int = 0

    @property
    def failures(self) -> list[QualityResult]:
        return [r for r in self.results if not r.success]


@dataclass
class _Suite:
    suite: ExpectationSuite
    rules: list[ExpectationRule]
    by_id: dict[str, ExpectationRule] = field(default_factory=dict)
    # the suite without the rules a batch cannot run (their columns missing), by those rules
    partial: dict[frozenset[str], ExpectationSuite] = field(default_factory=dict)


class QualityChecker:
    """One Great Expectations context and one suite per message type, reused for every batch.

    Thread-safe: validations from concurrent streaming queries run one at a time.
    """

    def __init__(
        self, spark: SparkSession, lakehouse_path: str, rules: list[ExpectationRule]
    ) -> None:
        self._spark = spark
        self._layout = Layout(lakehouse_path)
        self._rules = list(rules)
        local = _local_layout(self._layout)
        quality_dir = local.local_quality_dir()
        _check_java_regexes(spark, self._rules)
        self.docs_dir = local.local_quality_docs()
        quality_dir.mkdir(parents=True, exist_ok=True)
        self._context = gx.get_context(mode="file", project_root_dir=str(quality_dir))
        self._context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self._context.variables.save()
        self._configure_docs_site()
        # persist=False: GE's default persists every batch it loads (each validate() and each
        # _flag_by_keys() call) and never unpersists it; a long-running stream then fills the
        # executors' memory and disk with every batch it ever checked. The caller persists the
        # batch when computing it twice is expensive (silver persists its decoded rows).
        self._datasource = self._context.data_sources.add_or_update_spark(
            name=DATASOURCE, persist=False
        )
        self._batch_definitions: dict[str, BatchDefinition] = {}
        self._suites: dict[str, _Suite] = {}
        self._latest: dict[str, tuple[ExpectationSuiteValidationResult, str, int, datetime]] = {}
        self._lock = threading.RLock()
        for message_type in sorted({r.message_type for r in self._rules}):
            self._suite_for(message_type)

    @property
    def docs_index(self) -> Path:
        """The Data Docs entry page (exists after :meth:`build_data_docs`)."""
        return self.docs_dir / "index.html"

    def suite_names(self) -> list[str]:
        return sorted(self._suites)

    def rules_for(self, message_type: str) -> list[ExpectationRule]:
        return list(self._suite_for(message_type).rules)

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
        # Great Expectations' Spark execution engine keeps the active batch as state, shared by
        # every asset of the datasource: concurrent streaming queries must take turns.
        with self._lock:
            return self._validate(
                df,
                message_type=message_type,
                table=table,
                batch_id=batch_id,
                reference_time=reference_time,
            )

    def _validate(
        self,
        df: DataFrame,
        *,
        message_type: str,
        table: str,
        batch_id: int,
        reference_time: datetime | None,
    ) -> QualityOutcome:
        entry = self._suite_for(message_type)
        missing = _missing_columns(entry.rules, df.schema)
        for rule in entry.rules:
            if rule.expectation_id in missing:
                log.warning(
                    "%s on %s batch %s: skipped, column(s) %s not in the batch%s",
                    rule.describe(),
                    table,
                    batch_id,
                    ", ".join(missing[rule.expectation_id]),
                    " (policy fail: the batch fails)" if rule.policy == "fail" else "",
                )
        validated_at = datetime.now(UTC)
        reference = reference_time if reference_time is not None else validated_at
        parameters = {TIMESTAMP_MAX_PARAMETER: reference + TIMESTAMP_MAX_SLACK}
        batch = self._batch_definition(table).get_batch(batch_parameters={"dataframe": df})
        suite_result = batch.validate(
            self._runnable_suite(entry, frozenset(missing)),
            result_format=COUNTS_ONLY,
            expectation_parameters=parameters,
        )
        verdicts = self._match_results(entry, suite_result, frozenset(missing))
        for rule, verdict in verdicts:
            if not verdict.success and verdict.result.get("unexpected_count"):
                # the sample COUNTS_ONLY left out, for the failures only (results, Data Docs)
                sample = batch.validate(
                    self._expectation(rule),
                    result_format={"result_format": "BASIC", "partial_unexpected_count": 5},
                    expectation_parameters=parameters,
                )
                verdict.result["partial_unexpected_list"] = sample.result.get(
                    "partial_unexpected_list", []
                )
        rows_checked = max((v.result.get("element_count") or 0 for _, v in verdicts), default=None)
        to_quarantine = [
            (rule, v) for rule, v in verdicts if rule.policy == "quarantine" and not v.success
        ]
        fail_batch = any(rule.policy == "fail" and not v.success for rule, v in verdicts) or any(
            rule.policy == "fail" for rule in entry.rules if rule.expectation_id in missing
        )
        if to_quarantine:
            passed, failed, rows_quarantined = self._split(df, batch, to_quarantine, parameters)
        else:
            passed, failed, rows_quarantined = (
                df,
                _with_reason(df.where(F.lit(False)), F.lit("")),
                0,
            )
        verdict_of = {rule.expectation_id: v for rule, v in verdicts}

        def result(rule: ExpectationRule) -> QualityResult:
            v = verdict_of.get(rule.expectation_id)  # None: skipped, its columns missing
            return QualityResult(
                batch_id=int(batch_id),
                table=table,
                message_type=message_type,
                expectation=rule.expectation_id,
                expectation_type=rule.expectation,
                policy=rule.policy,
                success=bool(v.success) if v is not None else False,
                element_count=_int_or_none(v.result.get("element_count"))
                if v is not None
                else None,
                unexpected_count=_int_or_none(v.result.get("unexpected_count"))
                if v is not None
                else None,
                observed_value=format_observed(v.result)
                if v is not None
                else f"{SKIPPED}: column(s) {', '.join(missing[rule.expectation_id])} "
                "not in the batch",
                validated_at=validated_at,
                rows_checked=rows_checked,
                rows_quarantined=rows_quarantined,
            )

        results = [result(rule) for rule in entry.rules]  # in the suite's order
        self._latest[message_type] = (suite_result, table, int(batch_id), validated_at)
        return QualityOutcome(
            table=table,
            message_type=message_type,
            batch_id=int(batch_id),
            passed=passed,
            failed=failed,
            results=results,
            fail_batch=fail_batch,
            rows_checked=rows_checked,
            rows_quarantined=rows_quarantined,
        )

    def _runnable_suite(self, entry: _Suite, skipped: frozenset[str]) -> ExpectationSuite:
        """The suite, or a copy without the ``skipped`` rules (by expectation id)."""
        if not skipped:
            return entry.suite
        found = entry.partial.get(skipped)
        if found is None:
            kept = [
                e
                for e in entry.suite.expectations
                if entry.by_id[str(e.id)].expectation_id not in skipped
            ]
            # not stored: Data Docs show the full suite. GE binds only id-less copies to a
            # suite; the copies get the ids back so that their results find their rules.
            found = ExpectationSuite(name=entry.suite.name, expectations=[copy(e) for e in kept])
            for bound, original in zip(found.expectations, kept, strict=True):
                bound.id = original.id
            entry.partial[skipped] = found
        return found

    def _match_results(
        self,
        entry: _Suite,
        suite_result: ExpectationSuiteValidationResult,
        skipped: frozenset[str] = frozenset(),
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
            if rule.expectation_id not in skipped
        ]

    def _split(
        self,
        df: DataFrame,
        batch: Any,
        failing: list[tuple[ExpectationRule, ExpectationValidationResult]],
        parameters: dict[str, Any],
    ) -> tuple[DataFrame, DataFrame, int]:
        """Flag the rows of each failed quarantine rule; return (passed, failed, rows failed)."""
        flagged = df
        flags: list[str] = []
        modelled: list[int] = []
        for i, (rule, _) in enumerate(failing):
            name = _FLAG.format(i)
            predicate = unexpected_predicate(rule, parameters)
            if predicate is None:
                flagged = self._flag_by_keys(flagged, batch, rule, parameters, name)
            else:
                flagged = flagged.withColumn(name, F.coalesce(predicate, F.lit(False)))
                modelled.append(i)
            flags.append(name)
        any_flag = _any(F.col(f) for f in flags)
        counts = flagged.agg(
            *[F.sum(F.col(f).cast("long")).alias(f) for f in flags],
            F.sum(any_flag.cast("long")).alias("__any"),
        ).first()
        assert counts is not None
        drifted = [
            i
            for i in modelled
            if (counts[flags[i]] or 0) != failing[i][1].result.get("unexpected_count")
        ]
        for i in drifted:
            rule, verdict = failing[i]
            log.warning(
                "%s: row predicate found %s rows, Great Expectations %s; using GE's row list",
                rule.describe(),
                counts[flags[i]],
                verdict.result.get("unexpected_count"),
            )
            flagged = self._flag_by_keys(flagged.drop(flags[i]), batch, rule, parameters, flags[i])
        rows_failed = int(counts["__any"] or 0)
        if drifted:
            rows_failed = int(flagged.where(any_flag).count())
        reason = F.concat_ws(
            "; ",
            *[
                F.when(F.col(flags[i]), F.lit(_reason(rule, verdict)))
                for i, (rule, verdict) in enumerate(failing)
            ],
        )
        columns = df.columns
        passed = flagged.where(~any_flag).select(*columns)
        failed = _with_reason(flagged.where(any_flag), reason).select(
            *columns, "reason_code", "stage", "reason"
        )
        return passed, failed, rows_failed

    def _flag_by_keys(
        self,
        df: DataFrame,
        batch: Any,
        rule: ExpectationRule,
        parameters: dict[str, Any],
        name: str,
    ) -> DataFrame:
        """Flag the rows GE lists as unexpected, found by their Kafka coordinates."""
        verdict = batch.validate(
            self._expectation(rule),
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

    def _suite_for(self, message_type: str) -> _Suite:
        entry = self._suites.get(message_type)
        if entry is not None:
            return entry
        rules = suite_rules(message_type, self._rules)
        suite = ExpectationSuite(name=message_type)
        for rule in rules:
            suite.add_expectation(self._expectation(rule))
        suite = self._context.suites.add_or_update(suite)
        entry = _Suite(suite=suite, rules=rules)
        for rule, expectation in zip(rules, suite.expectations, strict=True):
            entry.by_id[str(expectation.id)] = rule
        self._suites[message_type] = entry
        return entry

    @staticmethod
    def _expectation(rule: ExpectationRule) -> Expectation:
        return rule.to_expectation()

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

    def _configure_docs_site(self) -> None:
        for name in list(self._context.list_data_docs_sites()):
            if name != DOCS_SITE:
                self._context.delete_data_docs_site(name)
        site: Any = {
            "class_name": "SiteBuilder",
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            "show_how_to_buttons": False,
            "store_backend": {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": str(self.docs_dir),
            },
        }
        if DOCS_SITE in self._context.list_data_docs_sites():
            self._context.update_data_docs_site(DOCS_SITE, site)
        else:
            self._context.add_data_docs_site(DOCS_SITE, site)

    def build_data_docs(self) -> Path:
        """Render every suite and the latest result of each under ``<lakehouse>/quality/docs``.

        Only the latest validation of each suite is kept in GE's store (older ones are removed),
        so the index lists one result per suite. Returns the path of ``index.html``.
        """
        with self._lock:
            return self._build_data_docs()

    def _build_data_docs(self) -> Path:
        store = self._context.validation_results_store
        for message_type, (result, table, batch_id, when) in self._latest.items():
            suite_id = ExpectationSuiteIdentifier(name=message_type)
            for key in store.list_keys():
                if isinstance(key, ValidationResultIdentifier) and (
                    key.expectation_suite_identifier.name == message_type
                ):
                    store.remove_key(key)
            run_id = RunIdentifier(run_name=f"{table}-batch-{batch_id}", run_time=when)
            # GE's own ValidationDefinition.run stores these two (the renderer reads them).
            meta: dict[str, Any] = {"run_id": run_id, "validation_time": when}
            result.meta.update(meta)  # type: ignore[typeddict-item]
            key = ValidationResultIdentifier(
                expectation_suite_identifier=suite_id, run_id=run_id, batch_identifier=table
            )
            store.store_validation_results(result, key, suite_id)
        # Pages of removed results would linger; the index is rebuilt from the store anyway.
        shutil.rmtree(self.docs_dir / "validations", ignore_errors=True)
        self._context.build_data_docs(site_names=[DOCS_SITE])
        _insert_overview(self.docs_index, self._overview_rows())
        return self.docs_index

    def _overview_rows(self) -> list[dict[str, Any]]:
        """Each stored suite with its latest stored validation (from this run or an earlier one)."""
        store = self._context.validation_results_store
        latest: dict[str, ValidationResultIdentifier] = {}
        for key in store.list_keys():
            if not isinstance(key, ValidationResultIdentifier):
                continue
            name = key.expectation_suite_identifier.name
            if name not in latest or key.run_id.run_time > latest[name].run_id.run_time:
                latest[name] = key
        names = {suite.name for suite in self._context.suites.all()} | set(latest)
        rows: list[dict[str, Any]] = []
        for name in sorted(names):
            row: dict[str, Any] = {"suite": name, "suite_page": _page("expectations", name)}
            found = latest.get(name)
            result = store.get(found) if found is not None else None
            if found is not None and result is not None:
                failed = [
                    format_expectation_id(r.expectation_config.type, r.expectation_config.kwargs)
                    for r in result.results
                    if not r.success and r.expectation_config is not None
                ]
                pages = sorted(
                    (self.docs_dir / "validations" / Path(*name.split("."))).rglob("*.html")
                )
                row.update(
                    run=found.run_id.run_name,
                    time=found.run_id.run_time,
                    success=bool(result.success),
                    evaluated=result.statistics.get("evaluated_expectations"),
                    successful=result.statistics.get("successful_expectations"),
                    failed=failed,
                    result_page=pages[-1].relative_to(self.docs_dir).as_posix() if pages else None,
                )
            rows.append(row)
        return rows

    # -- results -----------------------------------------------------------------------------

    def write_results(self, results: list[QualityResult], batch_id: int, source: str = "") -> int:
        """Store results in ``<lakehouse>/quality/results``, idempotently per (source, batch, table)."""
        return write_results(self._spark, self._layout.root, results, batch_id, source)

    @property
    def results_path(self) -> str:
        return self._layout.quality_results


def _page(kind: str, suite_name: str) -> str:
    return f"{kind}/{'/'.join(suite_name.split('.'))}.html"


def _insert_overview(index: Path, rows: list[dict[str, Any]]) -> None:
    """Put a plain-HTML table of suites and latest results at the top of GE's index page.

    GE's own index tables are drawn by JavaScript loaded from public CDNs; this table reads
    without them (offline machines, locked-down browsers) and is what the browser test checks.
    """

    def esc(value: Any) -> str:
        return html.escape(str(value), quote=True)

    lines = [
        f'<section id="{OVERVIEW_ID}" class="container-fluid" style="padding:1em">',
        "<h2>protolake: expectation suites and their latest results</h2>",
        '<table class="table table-sm" border="1"><thead><tr><th>Suite</th><th>Latest run</th>'
        "<th>Validated at</th><th>Status</th><th>Expectations met</th><th>Failed expectations</th>"
        "</tr></thead><tbody>",
    ]
    for row in rows:
        suite = f'<a href="{esc(row["suite_page"])}">{esc(row["suite"])}</a>'
        if "run" not in row:
            lines.append(f"<tr><td>{suite}</td><td colspan=5>not validated yet</td></tr>")
            continue
        run = esc(row["run"])
        if row["result_page"]:
            run = f'<a href="{esc(row["result_page"])}">{run}</a>'
        status = "passed" if row["success"] else "FAILED"
        failed = "<br>".join(esc(f) for f in row["failed"]) or "none"
        lines.append(
            f"<tr><td>{suite}</td><td>{run}</td><td>{esc(row['time'])}</td><td>{status}</td>"
            f"<td>{esc(row['successful'])} of {esc(row['evaluated'])}</td><td>{failed}</td></tr>"
        )
    lines.append("</tbody></table></section>")
    text = index.read_text(encoding="utf-8")
    text = re.sub(rf'<section id="{OVERVIEW_ID}".*?</section>', "", text, flags=re.S)
    body = re.search(r"<body[^>]*>", text)
    at = body.end() if body else 0
    index.write_text(text[:at] + "\n".join(lines) + text[at:], encoding="utf-8")


def _missing_columns(rules: list[ExpectationRule], schema: StructType) -> dict[str, list[str]]:
    """The columns each rule reads that the batch lacks, by expectation id (only rules with some)."""
    present = set(schema.fieldNames())
    out: dict[str, list[str]] = {}
    for rule in rules:
        missing = [c for c in rule.columns() if c not in present]
        if missing:
            out[rule.expectation_id] = missing
    return out


def _check_java_regexes(spark: SparkSession, rules: list[ExpectationRule]) -> None:
    """Compile every configured regular expression with Java's engine, the one Spark uses."""
    jvm = getattr(spark.sparkContext, "_jvm", None) if hasattr(spark, "sparkContext") else None
    if jvm is None:  # Spark Connect: no JVM in this process; the Python pre-check stands
        return
    for rule in rules:
        for pattern in rule.regexes():
            error = java_regex_error(jvm, pattern)
            if error is not None:
                raise QualityConfigError(
                    f"{rule.describe()}: invalid regular expression {pattern!r} for Java's "
                    f"java.util.regex (Spark's engine): {error}"
                )


def _reason(rule: ExpectationRule, verdict: ExpectationValidationResult) -> str:
    result = verdict.result
    return (
        f"{rule.expectation_id} failed: {result.get('unexpected_count')} of "
        f"{result.get('element_count')} rows unexpected"
    )


def _with_reason(df: DataFrame, reason: Column) -> DataFrame:
    return df.withColumns(
        {"reason_code": F.lit(REASON_CODE), "stage": F.lit(STAGE), "reason": reason.cast("string")}
    )


def _any(flags: Any) -> Column:
    out = F.lit(False)
    for flag in flags:
        out = out | flag
    return out


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


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _local_layout(layout: Layout) -> Layout:
    """Where Great Expectations keeps its context and Data Docs: the lakehouse itself when it
    is a local folder, else a layout rooted in a new temporary folder."""
    if layout.is_local:
        return layout
    local = Layout(tempfile.mkdtemp(prefix="protolake-gx-"))
    log.warning(
        "quality: the lakehouse %s is not on the local disk: Great Expectations' context and "
        "Data Docs go to %s (the results table stays in the lakehouse)",
        layout.root,
        local.local_quality_dir(),
    )
    return local
