"""Data quality for silver micro-batches, with Great Expectations 1.x on Spark DataFrames.

Contract (called by the silver job inside its ``foreachBatch``, before its writes commit)::

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
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quality.checker import QualityChecker, QualityFailed, QualityOutcome
    from quality.results import RESULTS_SCHEMA, QualityResult, summarize
    from quality.rules import (
        POLICIES,
        ExpectationRule,
        QualityConfigError,
        default_rules,
        parse_rules,
    )

# Loaded on first use: `quality.results` (also used by the pipelines for Delta commit retries)
# must not pull in Great Expectations, whose import alone takes seconds.
_HOME = {
    "QualityChecker": "quality.checker",
    "QualityFailed": "quality.checker",
    "QualityOutcome": "quality.checker",
    "RESULTS_SCHEMA": "quality.results",
    "QualityResult": "quality.results",
    "summarize": "quality.results",
    "POLICIES": "quality.rules",
    "ExpectationRule": "quality.rules",
    "QualityConfigError": "quality.rules",
    "default_rules": "quality.rules",
    "parse_rules": "quality.rules",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'quality' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)


__all__ = [
    "POLICIES",
    "RESULTS_SCHEMA",
    "ExpectationRule",
    "QualityChecker",
    "QualityConfigError",
    "QualityFailed",
    "QualityOutcome",
    "QualityResult",
    "default_rules",
    "parse_rules",
    "summarize",
]
