"""Data quality for silver micro-batches, with Great Expectations 1.x on Spark DataFrames.

Contract (called by the silver job inside its ``foreachBatch``, before its writes commit;
``QualityChecker``/``QualityFailed``/``QualityOutcome`` live in :mod:`quality.checker`, rules in
:mod:`quality.rules`, the results table in :mod:`quality.results`)::

    rules = parse_rules(config.quality.expectations)       # QualityConfigError at start-up
    checker = QualityChecker(spark, lakehouse_path, rules)  # one GE context, one suite per type
    outcome = checker.validate(df, message_type=..., table=..., batch_id=...)
    outcome.passed / outcome.failed / outcome.results / outcome.fail_batch
    checker.write_results(outcome.results, batch_id)        # Delta quality/results, idempotent
    if outcome.fail_batch: raise QualityFailed(outcome)     # nothing of the batch is committed
    checker.build_data_docs()                               # HTML under quality/docs
    summarize(spark, lakehouse_path)                        # per-table summary rows

Policies: ``warn`` records the verdict; ``quarantine`` moves the unexpected rows to
``outcome.failed`` (``reason_code = DQ_FAILED``, ``stage = quality``); ``fail`` sets
``fail_batch``. This package never imports ``pipelines`` or Airflow.

Importing the package loads nothing: only :mod:`quality.rules` and :mod:`quality.checker`
import Great Expectations (seconds), so reading results (:mod:`quality.results`) does not.
"""
