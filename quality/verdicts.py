"""A validation's verdicts on one batch (``quality.checker``) and the results they give.

:class:`Verdicts` holds GE's verdict on each rule that ran, by expectation id, with what finds
their rows (the compiled rules and their aggregation's row, GE's batch). :func:`conclude` puts
them in suite order and says what follows: the failed ``quarantine`` rules, ``fail_batch`` (a
``fail`` rule failed or was skipped) and the rows checked. :func:`rows_failed` reads the rows
the failed quarantine rules flag from the compiled aggregation when it counted them.
:func:`result_row` gives a rule's :class:`QualityResult`, "skipped" when the batch lacks the
rule's columns, :func:`skipped_result` such a rule's failed entry in the suite result (Data
Docs), and :func:`warn_skipped` logs each such rule.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from great_expectations.core.expectation_validation_result import ExpectationValidationResult
from great_expectations.expectations.expectation import Expectation
from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

from quality.compiled import CompiledRule, int_or_none
from quality.results import QualityResult, format_observed
from quality.rules import ExpectationRule

log = logging.getLogger(__name__)

SKIPPED = "skipped"  # observed_value prefix of a rule whose columns a batch lacks


@dataclass
class Verdicts:
    """One batch's verdicts: by expectation id, in GE's form, and how to find their rows."""

    by_id: dict[str, ExpectationValidationResult] = field(default_factory=dict)
    compiled: dict[str, CompiledRule] = field(default_factory=dict)
    ge_batch: Any = None  # GE's batch, when GE ran some rule (its rows are found through it)
    found: dict[str, Any] = field(default_factory=dict)  # the compiled aggregation's row


@dataclass
class Judged:
    """The verdicts in suite order and what follows from them."""

    ran: list[tuple[ExpectationRule, ExpectationValidationResult]]
    to_quarantine: list[tuple[ExpectationRule, ExpectationValidationResult]]
    fail_batch: bool
    rows_checked: int | None


def conclude(
    rules: list[ExpectationRule], missing: dict[str, list[str]], verdicts: Verdicts
) -> Judged:
    """What the verdicts on the suite's ``rules`` say; ``missing``: the skipped rules' columns."""
    ran = [
        (r, verdicts.by_id[r.expectation_id]) for r in rules if r.expectation_id in verdicts.by_id
    ]
    fail_batch = any(r.policy == "fail" and not v.success for r, v in ran) or any(
        r.policy == "fail" for r in rules if r.expectation_id in missing
    )
    return Judged(
        ran=ran,
        to_quarantine=[(r, v) for r, v in ran if r.policy == "quarantine" and not v.success],
        fail_batch=fail_batch,
        rows_checked=max((v.result.get("element_count") or 0 for _, v in ran), default=None),
    )


def rows_failed(
    verdicts: Verdicts, failing: list[tuple[ExpectationRule, ExpectationValidationResult]]
) -> int | None:
    """Rows the failed quarantine rules flag, from the compiled aggregation, if it counted them:
    the failed rules are all compiled, and are exactly the compiled quarantine rules that
    found a row (a rule that passes with unexpected rows, ``mostly``, would be counted too)."""
    failed_ids = {rule.expectation_id for rule, _ in failing}
    if not failed_ids <= set(verdicts.compiled):
        return None
    counted = {
        expectation_id
        for expectation_id, c in verdicts.compiled.items()
        if c.rule.policy == "quarantine"
        and c.row_level
        and (verdicts.by_id[expectation_id].result.get("unexpected_count") or 0) > 0
    }
    if counted != failed_ids:
        return None
    return int(verdicts.found["__any_quarantine"] or 0)


def result_row(
    template: QualityResult,
    rule: ExpectationRule,
    by_id: dict[str, ExpectationValidationResult],
    missing: dict[str, list[str]],
) -> QualityResult:
    """The rule's result row: its verdict, or "skipped" when the batch lacks its columns."""
    v = by_id.get(rule.expectation_id)
    mine = replace(
        template,
        expectation=rule.expectation_id,
        expectation_type=rule.expectation,
        policy=rule.policy,
    )
    if v is None:
        columns = ", ".join(missing[rule.expectation_id])
        return replace(mine, observed_value=f"{SKIPPED}: column(s) {columns} not in the batch")
    return replace(
        mine,
        success=bool(v.success),
        element_count=int_or_none(v.result.get("element_count")),
        unexpected_count=int_or_none(v.result.get("unexpected_count")),
        observed_value=format_observed(v.result),
    )


def skipped_result(
    expectation: Expectation, columns: list[str], batch_id: str
) -> ExpectationValidationResult:
    """The suite result's entry for a rule the batch could not run (it lacks ``columns``): a
    failure, as its result row says, so Data Docs do not show the batch as passed."""
    config = expectation.configuration
    why = f"{SKIPPED}: column(s) {', '.join(columns)} not in the batch"
    return ExpectationValidationResult(
        success=False,
        expectation_config=ExpectationConfiguration(
            type=config.type,
            kwargs={"batch_id": batch_id, **config.kwargs},
            meta=config.meta,
            id=config.id,
            severity=config.severity,
        ),
        result={"observed_value": why},
        # as GE reports a rule whose column the batch lacks: one that could not run
        exception_info={
            "raised_exception": True,
            "exception_message": why,
            "exception_traceback": why,  # Data Docs render it (None fails their template)
        },
    )


def warn_skipped(
    rules: list[ExpectationRule], missing: dict[str, list[str]], table: str, batch_id: int
) -> None:
    """Log a warning for each rule the batch skips (its columns in ``missing``)."""
    for rule in rules:
        if rule.expectation_id in missing:
            log.warning(
                "%s on %s batch %s: skipped, column(s) %s not in the batch%s",
                rule.describe(),
                table,
                batch_id,
                ", ".join(missing[rule.expectation_id]),
                " (policy fail: the batch fails)" if rule.policy == "fail" else "",
            )
