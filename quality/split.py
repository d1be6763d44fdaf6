"""Splitting a batch into the rows that stay in silver and the rows failed quarantine rules flag.

:func:`split_batch` takes the failed ``quarantine`` rules with their GE verdicts and a way to
flag each rule's unexpected rows; it returns ``passed`` (no flag set), ``failed`` (some flag
set, with ``reason_code = "DQ_FAILED"``, ``stage = "quality"`` and a ``reason`` naming every
rule that flagged the row, e.g. ``expect_column_values_to_not_be_null(column=order_id) failed:
3 of 100 rows unexpected``) and how many rows failed. Both are lazy DataFrames over the input
and partition it. :func:`split_masks` is its twin for Arrow rows: the failed rows' mask and
their reasons, from each failed rule's mask of unexpected rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pyarrow as pa
from great_expectations.core.expectation_validation_result import ExpectationValidationResult
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812

from quality.rules import ExpectationRule

REASON_CODE = "DQ_FAILED"
STAGE = "quality"
_FLAG = "__dq_flag_{}"


def split_batch(
    df: DataFrame,
    failing: list[tuple[ExpectationRule, ExpectationValidationResult]],
    flag: Callable[[DataFrame, ExpectationRule, str], DataFrame],
    rows_failed: int | None = None,
) -> tuple[DataFrame, DataFrame, int]:
    """(passed, failed, rows failed); see the module docstring.

    Args:
        flag: adds a boolean column (the name given) true for the rule's unexpected rows.
        rows_failed: the number of flagged rows when the caller counted them already (else
            counted here, one Spark job).
    """
    flagged = df
    flags: list[str] = []
    for i, (rule, _) in enumerate(failing):
        name = _FLAG.format(i)
        flagged = flag(flagged, rule, name)
        flags.append(name)
    any_flag = _any(F.col(f) for f in flags)
    if rows_failed is None:
        rows_failed = int(flagged.where(any_flag).count())
    reason = F.concat_ws(
        "; ",
        *[
            F.when(F.col(flags[i]), F.lit(reason_text(rule, verdict)))
            for i, (rule, verdict) in enumerate(failing)
        ],
    )
    columns = df.columns
    passed = flagged.where(~any_flag).select(*columns)
    failed = with_reason(flagged.where(any_flag), reason).select(
        *columns, "reason_code", "stage", "reason"
    )
    return passed, failed, rows_failed


def with_reason(df: DataFrame, reason: Column) -> DataFrame:
    """``df`` with the quarantine columns of a quality failure."""
    return df.withColumns(
        {"reason_code": F.lit(REASON_CODE), "stage": F.lit(STAGE), "reason": reason.cast("string")}
    )


def split_masks(
    rows: int,
    failing: list[tuple[ExpectationRule, ExpectationValidationResult]],
    masks: list[pa.BooleanArray],
) -> tuple[pa.BooleanArray, list[str]]:
    """(failed, reasons) over ``rows`` Arrow rows: a row fails when a mask (one per ``failing``
    rule, no nulls) flags it; its reason joins the flagging rules' texts with "; " in rule
    order, as :func:`split_batch`'s ``concat_ws`` does."""
    texts = [reason_text(rule, verdict) for rule, verdict in failing]
    flags = [m.to_pylist() for m in masks]
    failed: list[bool] = [False] * rows
    reasons: list[str] = []
    for i, row in enumerate(zip(*flags, strict=True)):
        if any(row):
            failed[i] = True
            reasons.append("; ".join(t for t, f in zip(texts, row, strict=True) if f))
    return pa.array(failed, pa.bool_()), reasons


def reason_text(rule: ExpectationRule, verdict: ExpectationValidationResult) -> str:
    """The ``reason`` a row the failed ``rule`` flags gets (one part of it)."""
    result = verdict.result
    return (
        f"{rule.expectation_id} failed: {result.get('unexpected_count')} of "
        f"{result.get('element_count')} rows unexpected"
    )


def _any(flags: Iterable[Column]) -> Column:
    out = F.lit(False)
    for flag in flags:
        out = out | flag
    return out
