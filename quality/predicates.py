"""Row predicates: which rows of a batch a row-level expectation finds unexpected.

For the common column-map expectations this module writes the condition GE's Spark
implementation uses (``great_expectations/expectations/metrics/*_map_metrics``), negated and
null-aware the way GE's map metrics are: a column-map expectation other than the null checks
ignores null values, and a multicolumn one ignores the rows its ``ignore_row_if`` names.
:mod:`quality.compiled` counts the unexpected rows with these conditions and the checker moves
the same rows out of silver; ``tests/integration/quality/test_quality_predicates.py`` and
``test_quality_compiled_parity.py`` prove they find exactly GE's rows.

``unexpected_predicate(rule)`` returns a Spark ``Column`` that is true exactly for unexpected
rows, or ``None`` when this module has no predicate (the rule then runs through GE, which names the
unexpected rows by their Kafka coordinates). The uniqueness predicates are window functions: add the
Column with ``withColumn`` and filter on that column (Spark refuses windows in ``where``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import Column, Window
from pyspark.sql import functions as F  # noqa: N812  (Spark's documented alias)

from quality.rules import ExpectationRule, judged_kwargs

# Arguments that narrow GE's domain in ways these predicates do not model: leave them to GE.
_UNMODELLED = frozenset({"row_condition", "condition_parser"})


def unexpected_predicate(
    rule: ExpectationRule, parameters: Mapping[str, Any] | None = None
) -> Column | None:
    """A Column true for the rows ``rule`` finds unexpected, or None if not modelled here.

    Args:
        rule: a row-level rule.
        parameters: values for ``{"$PARAMETER": name}`` arguments (GE suite parameters).
    """
    build = _BUILDERS.get(rule.expectation)
    if build is None or _UNMODELLED & set(rule.kwargs):
        return None
    return build(resolve_kwargs(judged_kwargs(rule), parameters or {}))


def resolve_kwargs(kwargs: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments with GE's ``{"$PARAMETER": name}`` values replaced by ``parameters[name]``."""
    return {k: _resolve(v, parameters) for k, v in kwargs.items()}


def _resolve(value: Any, parameters: Mapping[str, Any]) -> Any:
    if isinstance(value, Mapping) and set(value) == {"$PARAMETER"}:
        return parameters[value["$PARAMETER"]]
    return value


def _not_null(kw: dict[str, Any]) -> Column:
    return F.col(kw["column"]).isNull()


def _null(kw: dict[str, Any]) -> Column:
    return F.col(kw["column"]).isNotNull()


def _in_set(kw: dict[str, Any]) -> Column:
    c = F.col(kw["column"])
    if kw.get("value_set") is None:  # GE: vacuously true
        return F.lit(False)
    return c.isNotNull() & ~c.isin(list(kw["value_set"]))


def _not_in_set(kw: dict[str, Any]) -> Column:
    c = F.col(kw["column"])
    return c.isNotNull() & c.isin(list(kw.get("value_set") or []))


def _within(value: Column, kw: dict[str, Any]) -> Column:
    lo, hi = kw.get("min_value"), kw.get("max_value")
    cond = F.lit(True)
    if lo is not None:
        cond = cond & ((value > F.lit(lo)) if kw.get("strict_min") else (value >= F.lit(lo)))
    if hi is not None:
        cond = cond & ((value < F.lit(hi)) if kw.get("strict_max") else (value <= F.lit(hi)))
    return cond


def _between(kw: dict[str, Any]) -> Column:
    c = F.col(kw["column"])
    return c.isNotNull() & ~_within(c, kw)


def _lengths_between(kw: dict[str, Any]) -> Column:
    c = F.col(kw["column"])
    return c.isNotNull() & ~_within(F.length(c), kw)


def _lengths_equal(kw: dict[str, Any]) -> Column:
    c = F.col(kw["column"])
    return c.isNotNull() & (F.length(c) != F.lit(kw["value"]))


def _match_regex(kw: dict[str, Any]) -> Column:
    c = F.col(kw["column"])
    return c.isNotNull() & ~c.rlike(kw["regex"])


def _not_match_regex(kw: dict[str, Any]) -> Column:
    c = F.col(kw["column"])
    return c.isNotNull() & c.rlike(kw["regex"])


def _unique(kw: dict[str, Any]) -> Column:
    # GE: count over a window partitioned by the value; every copy of a duplicate is unexpected.
    c = F.col(kw["column"])
    return c.isNotNull() & (F.count(F.lit(1)).over(Window.partitionBy(c)) > 1)


def _compound_unique(kw: dict[str, Any]) -> Column:
    cols = [F.col(name) for name in kw["column_list"]]
    counted = _has_twin(cols)
    ignore = kw.get("ignore_row_if", "all_values_are_missing")
    if ignore == "any_value_is_missing":
        kept = _all(c.isNotNull() for c in cols)
    elif ignore == "never":
        kept = F.lit(True)
    else:  # all_values_are_missing (GE's default for this expectation)
        kept = ~_all(c.isNull() for c in cols)
    # The window counts over every row, GE's over the kept rows only; the two agree because an
    # ignored row never shares a key with a kept one (the key's null pattern differs), except
    # for "any_value_is_missing", where kept rows have no nulls and so do their twins.
    return kept & counted


def _has_twin(cols: list[Column]) -> Column:
    """True for a row another row shares all of ``cols`` with (nulls equal, as in a group by).

    A count over a window partitioned by the columns themselves: rows spread over tasks by
    their whole key (a partition by fewer columns would put a one-partition topic's batch in
    one task), and no struct of them to hash and sort."""
    return F.count(F.lit(1)).over(Window.partitionBy(*cols)) > 1


def _all(conds: Any) -> Column:
    out = F.lit(True)
    for cond in conds:
        out = out & cond
    return out


_BUILDERS: dict[str, Callable[[dict[str, Any]], Column]] = {
    "expect_column_values_to_not_be_null": _not_null,
    "expect_column_values_to_be_null": _null,
    "expect_column_values_to_be_in_set": _in_set,
    "expect_column_values_to_not_be_in_set": _not_in_set,
    "expect_column_values_to_be_between": _between,
    "expect_column_value_lengths_to_be_between": _lengths_between,
    "expect_column_value_lengths_to_equal": _lengths_equal,
    "expect_column_values_to_match_regex": _match_regex,
    "expect_column_values_to_not_match_regex": _not_match_regex,
    "expect_column_values_to_be_unique": _unique,
    "expect_compound_columns_to_be_unique": _compound_unique,
}

MODELLED_EXPECTATIONS = frozenset(_BUILDERS)
