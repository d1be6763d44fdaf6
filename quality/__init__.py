"""Data quality for silver micro-batches, with Great Expectations 1.x on Spark DataFrames.

Contract (called by the silver job inside its ``foreachBatch``, before its writes commit;
``QualityChecker``/``QualityFailed``/``QualityOutcome``/``ArrowOutcome`` live in
:mod:`quality.checker`, rules in :mod:`quality.rules`, the results table in
:mod:`quality.results`)::

    rules = parse_rules(config.quality.expectations)       # QualityConfigError at start-up
    checker = QualityChecker(spark, lakehouse_path, rules)  # one GE context, one suite per type
    outcome = checker.validate(df, message_type=..., table=..., batch_id=...)
    outcome.passed / outcome.failed / outcome.results / outcome.fail_batch  # QualityOutcome
    # or, for a batch held as Arrow rows in the driver: an ArrowOutcome, or None (then call
    # validate on a DataFrame of the rows)
    outcome = checker.validate_arrow(rows, schema, message_type=..., table=..., batch_id=...)
    outcome.failed / outcome.reasons / outcome.results / outcome.fail_batch  # ArrowOutcome
    # failed: a boolean mask over the rows (True: quarantined; no ``passed``: the kept rows are
    # rows.filter(pc.invert(outcome.failed))); reasons: one per quarantined row, in row order
    checker.write_results(outcome.results, batch_id)        # Delta quality/results, idempotent
    if outcome.fail_batch: raise QualityFailed(outcome)     # nothing of the batch is committed
    checker.build_data_docs()                               # HTML under quality/docs
    summarize(spark, lakehouse_path)                        # per-table summary rows

Policies: ``warn`` records the verdict; ``quarantine`` moves the unexpected rows to
``outcome.failed`` (``reason_code = DQ_FAILED``, ``stage = quality``; ``validate_arrow``: marks
them in the ``failed`` mask, their texts in ``reasons``); ``fail`` sets ``fail_batch``. This
package never imports ``pipelines`` or Airflow.

How rules run (:mod:`quality.checker`): the expectation types below are compiled to Spark
columns (:mod:`quality.compiled`), all compiled rules of a table evaluated in ONE aggregation
over the batch and judged by each expectation's own GE ``_validate``, with no lock between
tables or queries; any other type, and a compiled type whose arguments or column types the
compiled form does not model (``row_condition``, ``condition_parser``, a regex or length rule
on a non-string column, a between rule whose bounds do not fit the column's type), runs through
Great Expectations' Spark engine, one batch at a time under a lock. Both give GE validation
results; results rows and Data Docs do not tell them apart.

``validate_arrow`` evaluates the compiled rules over a ``pyarrow.Table`` in the process
(:mod:`quality.arrow_checks`), no Spark job, with the verdicts, counts, ``fail_batch`` and
quarantined rows (and reasons) ``validate`` gives on a DataFrame of the same rows, and the same
results but for ``validated_at`` and the sample of duplicates of the two uniqueness rules
(``expect_column_values_to_be_unique``, ``expect_compound_columns_to_be_unique``: a failed
one's ``observed_value``), listed in row order where Spark lists them in shuffle order (other
duplicates, or the same in another order). It answers None when a rule the batch does not skip
is GE-run (below, or a compiled type with unmodelled arguments) or is one the Arrow
evaluator cannot answer with certainty of Spark's answer: a column type or comparison it does
not model (e.g. a decimal between, a naive-datetime bound, a mixed-type value set), a regex
outside the subset both Java's and Python's engines read alike (``.`` and ``$`` only on strings
without line terminators), NaN or -0.0 in a compared float column.

- compiled: ``expect_column_values_to_not_be_null``, ``expect_column_values_to_be_null``,
  ``expect_column_values_to_be_in_set``, ``expect_column_values_to_not_be_in_set``,
  ``expect_column_values_to_be_between``, ``expect_column_value_lengths_to_be_between``,
  ``expect_column_value_lengths_to_equal``, ``expect_column_values_to_match_regex``,
  ``expect_column_values_to_not_match_regex``, ``expect_column_values_to_be_unique``,
  ``expect_compound_columns_to_be_unique``, ``expect_table_row_count_to_be_between``,
  ``expect_table_row_count_to_equal``, ``expect_column_min_to_be_between``,
  ``expect_column_max_to_be_between`` (:data:`quality.compiled.COMPILED_EXPECTATIONS`);
- run by Great Expectations: every other type, e.g. ``expect_column_pair_values_a_to_be_
  greater_than_b``, ``expect_column_mean_to_be_between``, ``expect_column_values_to_be_of_type``.

Importing the package loads nothing: only :mod:`quality.rules` and :mod:`quality.checker`
import Great Expectations (seconds), so reading results (:mod:`quality.results`) does not.
"""
