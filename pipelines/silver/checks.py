"""Step 6 of a silver micro-batch: quality, before anything is written.

:class:`BatchChecks` checks the decoded rows of every table of a batch with the quality
checker, the tables at the same time (``lakehouse.streaming.run_together``: a small batch's
checks are mostly each Spark job's driver work, which overlaps that of the others). It gives
the rows to write per table and the results; the rows quality rejected go to quarantine
(``DQ_FAILED``, taken from the batch's path: as Arrow when a small batch's table was checked
as Arrow); a ``fail`` policy writes the results and raises ``QualityFailed`` before any other
write.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from lakehouse.streaming import run_together

from .arrow_rows import ArrowFailures, passed_rows
from .driver_pass import SmallBatch
from .plan import TablePlan, table_schema
from .spark_path import LargeBatch
from .writes import Rejects, Rows


class BatchChecks:
    """The quality checks of a silver query's batches.

    Args:
        spark: the job's session (a small batch's rows that cannot be checked as Arrow are
            checked as a local relation of it).
        checker: a ``quality.checker.QualityChecker``, or None: nothing is checked.
        write_results: writes a batch's quality results (``writes.BatchWrites.quality_results``),
            for a batch that a ``fail`` policy stops.
    """

    def __init__(
        self,
        spark: SparkSession,
        checker: Any,
        write_results: Callable[[list[Any], int], None],
    ) -> None:
        self.spark = spark
        self.checker = checker
        self.write_results = write_results

    def __call__(
        self,
        tables: list[tuple[TablePlan, Rows]],
        path: SmallBatch | LargeBatch,
        batch_id: int,
        reference_time: datetime | None,
        processed_at: datetime,
        quarantine: list[Rejects],
    ) -> tuple[list[tuple[TablePlan, Rows]], list[Any]]:
        """The rows to write per table and the results; failed rows are added to
        ``quarantine``; a ``fail`` policy writes the results and raises."""
        if self.checker is None:
            return tables, []
        to_write: list[tuple[TablePlan, Rows]] = []
        results: list[Any] = []
        failed_outcome: Any = None
        validations = [
            partial(self.validate, plan, rows, batch_id, reference_time) for plan, rows in tables
        ]
        for (plan, _), checked in zip(tables, run_together(validations), strict=True):
            outcome, passed, failed = checked
            results.extend(outcome.results)
            if outcome.fail_batch and failed_outcome is None:
                failed_outcome = outcome
            to_write.append((plan, passed))
            if isinstance(failed, ArrowFailures):
                assert isinstance(path, SmallBatch)  # Arrow rows are a small batch's
                quarantine.append(path.quality_failures(failed, plan, processed_at, None))
            elif failed is not None:
                rows = outcome.rows_quarantined
                quarantine.append(path.quality_failures(failed, plan, processed_at, rows))
        if failed_outcome is not None:
            from quality.checker import QualityFailed

            self.write_results(results, batch_id)
            raise QualityFailed(failed_outcome)
        return to_write, results

    def validate(
        self,
        plan: TablePlan,
        rows: Rows,
        batch_id: int,
        reference_time: datetime | None,
    ) -> tuple[Any, Rows, DataFrame | ArrowFailures | None]:
        """One table's checks: (the checker's outcome, the rows that stay, the rows quality
        quarantined or None). Arrow rows are checked in this process when the checker can
        (``QualityChecker.validate_arrow``; their failures are Arrow too), else as a local
        relation."""
        assert plan.merged is not None
        where = {
            "message_type": plan.message_type,
            "table": plan.table,
            "batch_id": batch_id,
            "reference_time": reference_time,
        }
        if isinstance(rows, pa.Table):
            schema = table_schema(plan.merged)
            in_arrow = self.checker.validate_arrow(rows, schema, **where)
            if in_arrow is not None:
                if not in_arrow.rows_quarantined:
                    return in_arrow, rows, None
                failures = ArrowFailures(rows, in_arrow.failed, in_arrow.reasons)
                return in_arrow, passed_rows(rows, in_arrow.failed), failures
            rows = self.spark.createDataFrame(rows, schema=schema)
        outcome = self.checker.validate(rows, **where)
        return outcome, outcome.passed, outcome.failed if outcome.rows_quarantined else None
