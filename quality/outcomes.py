"""What a quality validation of one silver batch found (``quality.checker``): the outcome of a
DataFrame batch (:class:`QualityOutcome`, its rows split into kept and failed) or of Arrow rows
the driver holds (:class:`ArrowOutcome`, a mask of the failed rows), and the error a ``fail``
rule raises (:class:`QualityFailed`)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame

from quality.results import QualityResult


class QualityFailed(RuntimeError):  # noqa: N818  (name fixed by the silver contract)
    """A ``fail``-policy expectation failed: the batch must not be committed."""

    def __init__(self, outcome: QualityOutcome | ArrowOutcome) -> None:
        self.outcome = outcome
        failed = [r.expectation for r in outcome.results if r.policy == "fail" and not r.success]
        super().__init__(
            f"quality check failed for {outcome.table} batch {outcome.batch_id}: "
            + "; ".join(failed)
        )


@dataclass(kw_only=True)
class Outcome:
    """What a validation of one batch found, whichever way its rows were held."""

    table: str
    message_type: str
    batch_id: int
    results: list[QualityResult]
    fail_batch: bool
    rows_checked: int | None = None
    rows_quarantined: int = 0

    @property
    def failures(self) -> list[QualityResult]:
        return [r for r in self.results if not r.success]


@dataclass(kw_only=True)
class QualityOutcome(Outcome):
    """What ``QualityChecker.validate`` found in one batch (see ``quality.checker``)."""

    passed: DataFrame
    failed: DataFrame


@dataclass(kw_only=True)
class ArrowOutcome(Outcome):
    """What ``QualityChecker.validate_arrow`` found in one batch of Arrow rows.

    ``failed`` is a boolean mask over the rows (no nulls): the rows a failed ``quarantine``
    rule flags (``outcome.failed`` of ``QualityChecker.validate``); ``reasons`` has one
    text per such row, in row order (``outcome.failed``'s ``reason``).
    """

    failed: pa.BooleanArray
    reasons: list[str]
