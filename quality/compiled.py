"""Expectations compiled to Spark columns: all compiled rules of a table in one aggregation.

Great Expectations computes each expectation's metrics with Spark jobs of its own, under a lock
(its Spark engine keeps the active batch as shared state). For the expectation types below this
module computes the same metrics itself, as columns of ONE aggregation over the batch, and hands
them to the expectation's own ``_validate`` (GE's verdict logic: ``mostly``, percentages, bounds,
the result dict), so a compiled verdict is a GE ``ExpectationValidationResult`` like any other.

Metrics per compiled rule, with GE's metric names:

- every rule: ``table.row_count``;
- column map (values in set, between, lengths, regex, unique, ...): ``column_values.nonnull.
  unexpected_count`` (nulls, outside GE's domain), ``<map metric>.unexpected_count`` and
  ``<map metric>.unexpected_values`` (the first ``sample_size`` unexpected values, GE's
  ``partial_unexpected_list``); the null checks count over every row;
- multicolumn map (compound uniqueness): ``<map metric>.filtered_row_count`` (rows
  ``ignore_row_if`` keeps) besides the counts and values (dicts of the columns, as GE's);
- aggregates: ``table.row_count`` (row count between / equal), ``column.min`` / ``column.max``.

The unexpected rows are found by :mod:`quality.predicates` (GE's own conditions), so counting
and splitting the batch use the same expressions. A rule is compiled only when its arguments and
its columns' types are ones these predicates model (e.g. a numeric bound on a numeric column);
anything else (``row_condition``, a regex on a number, an unknown expectation) returns ``None``
from :func:`compile_rule` and runs through Great Expectations.

The unexpected sample of a rule that found unexpected rows is read after the aggregation, as GE
reads it: the first ``sample_size`` unexpected values in scan order (a ``limit`` query, which stops
reading once it has them), one small job per such rule. Collecting it in the aggregation instead
would gather every unexpected value of the batch to keep five: its cost grows with the batch,
and a batch of nothing but duplicates would hold all its values in one buffer. The uniqueness
rules too: their flag is a window over the whole batch, which their sample's query computes
again (a shuffle of the batch, paid only by a batch that has duplicates).

:func:`compile_rule` with ``columns=False`` makes the same decision (compiled or GE-run, by the
same arguments and column types) without building the Spark columns: for an evaluator of its
own, :mod:`quality.arrow_checks`, which computes the same metrics over a ``pyarrow.Table`` in
the driver and fills them with :func:`rule_metrics`. The names that evaluator shares with this
module are public: :data:`FLAG`, :data:`NULL_CHECKS`, :data:`MULTICOLUMN`, :data:`WINDOWED`,
:func:`rule_metrics`, :func:`lists_sample`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from great_expectations.core.expectation_validation_result import ExpectationValidationResult
from great_expectations.expectations.expectation import Expectation
from great_expectations.expectations.expectation_configuration import ExpectationConfiguration
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    NumericType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from quality.predicates import MODELLED_EXPECTATIONS, resolve_kwargs, unexpected_predicate
from quality.rules import ExpectationRule, expectation_class, judged_kwargs

ROW_COUNT = "table.row_count"
NULL_COUNT = "column_values.nonnull.unexpected_count"
NULL_CHECKS = frozenset({"expect_column_values_to_not_be_null", "expect_column_values_to_be_null"})
"""The null checks: they count over every row (no ``nonnull`` count, no null domain)."""
MULTICOLUMN = frozenset({"expect_compound_columns_to_be_unique"})
"""Multicolumn map rules: their domain is the rows ``ignore_row_if`` keeps, values are dicts."""
_STRING_ONLY = frozenset(
    {
        "expect_column_value_lengths_to_be_between",
        "expect_column_value_lengths_to_equal",
        "expect_column_values_to_match_regex",
        "expect_column_values_to_not_match_regex",
    }
)
WINDOWED = frozenset({"expect_column_values_to_be_unique", "expect_compound_columns_to_be_unique"})
"""Rules whose condition is a window over the batch (uniqueness): GE counts their rows instead
of summing a flag (0, not None, over no rows), and :mod:`quality.arrow_checks` collects their
sample while it counts (:func:`lists_sample`)."""
_BETWEEN = frozenset(
    {
        "expect_column_values_to_be_between",
        "expect_column_min_to_be_between",
        "expect_column_max_to_be_between",
    }
)
_SETS = frozenset({"expect_column_values_to_be_in_set", "expect_column_values_to_not_be_in_set"})
# aggregate expectations: the metric each reads
_AGGREGATES: dict[str, str] = {
    "expect_table_row_count_to_be_between": ROW_COUNT,
    "expect_table_row_count_to_equal": ROW_COUNT,
    "expect_column_min_to_be_between": "column.min",
    "expect_column_max_to_be_between": "column.max",
}
# arguments GE reads that the compiled metrics do not model
_UNMODELLED = frozenset({"row_condition", "condition_parser", "parse_strings_as_datetimes"})

COMPILED_EXPECTATIONS = MODELLED_EXPECTATIONS | frozenset(_AGGREGATES)
"""Expectation types :func:`compile_rule` may compile (the checker runs the others through GE)."""

FLAG = "__dq_unexpected_{}"
"""The name of rule ``i``'s unexpected-row flag (``FLAG.format(i)``, :attr:`CompiledRule.flag`),
``i`` its index in the evaluated rules (also the ``m{i}_...`` columns of the aggregated row)."""


@dataclass
class CompiledRule:
    """One compiled rule: its unexpected-row flag (row-level) and its metric aggregates, as Spark
    columns (None for a rule compiled with ``columns=False``, see :func:`compile_rule`)."""

    rule: ExpectationRule
    kwargs: dict[str, Any]  # with suite parameters resolved
    # true for unexpected rows; None for an aggregate expectation, or compiled without columns
    predicate: Column | None
    values: Column | None = None  # what GE lists for an unexpected row
    domain: Column | None = None  # rows in GE's domain (multicolumn: not ignored)
    metric: str | None = None  # an aggregate expectation's metric
    flag: str = ""  # the flag's column name in evaluate()'s frame
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def row_level(self) -> bool:
        """Whether the rule judges rows (has a predicate), not an aggregate."""
        return self.metric is None

    @property
    def map_metric(self) -> str | None:
        return getattr(expectation_class(self.rule.expectation), "map_metric", None)


def compile_rule(
    rule: ExpectationRule,
    schema: StructType,
    parameters: Mapping[str, Any] | None = None,
    *,
    columns: bool = True,
) -> CompiledRule | None:
    """The rule compiled for a batch of ``schema``, or None: GE must run it.

    ``columns=True``: with its Spark columns (``predicate``, ``values``, ``domain``), for
    :func:`evaluate`. ``columns=False``: the same decision (None for the same rules, schemas
    and parameters), without building the Spark columns (they stay None; building them costs
    py4j calls), for an evaluator of its own: :mod:`quality.arrow_checks` judges the rule over
    a ``pyarrow.Table`` (and may still answer None for the batch, see there)."""
    if rule.expectation not in COMPILED_EXPECTATIONS or _UNMODELLED & set(rule.kwargs):
        return None
    kwargs = resolve_kwargs(judged_kwargs(rule), parameters or {})
    types = {f.name: f.dataType for f in schema.fields}
    if not all(name in types for name in rule.columns()):
        return None
    if not _types_fit(rule.expectation, kwargs, types):
        return None
    metric = _AGGREGATES.get(rule.expectation)
    if metric is not None:
        return CompiledRule(rule, kwargs, None, metric=metric)
    if not columns:
        return CompiledRule(rule, kwargs, None)
    predicate = unexpected_predicate(rule, parameters)
    if predicate is None:
        return None
    if rule.expectation in MULTICOLUMN:
        cols = [F.col(c) for c in kwargs["column_list"]]
        return CompiledRule(
            rule, kwargs, predicate, values=F.struct(*cols), domain=_kept(kwargs, cols)
        )
    return CompiledRule(rule, kwargs, predicate, values=F.col(kwargs["column"]))


def evaluate(
    df: DataFrame, compiled: Sequence[CompiledRule], sample_size: int
) -> tuple[DataFrame, dict[str, Any]]:
    """Compute every rule's metrics in one aggregation; fill ``rule.metrics`` in place.

    Returns the batch with one boolean flag column per row-level rule (``rule.flag``: its
    unexpected rows), for splitting it, and the aggregated row (``__rows``: the row count,
    ``__any_<policy>``: rows flagged by any row-level rule of that policy).
    """
    flags: dict[str, Column] = {}
    for i, c in enumerate(compiled):
        if c.predicate is not None:
            c.flag = FLAG.format(i)
            flags[c.flag] = F.coalesce(c.predicate, F.lit(False))
    flagged = df.withColumns(flags) if flags else df
    aggs: list[Column] = [F.count(F.lit(1)).alias("__rows")]
    for policy in ("quarantine",):
        mine = [F.col(c.flag) for c in compiled if c.flag and c.rule.policy == policy]
        aggs.append(_count_if(_any(mine)).alias(f"__any_{policy}"))
    for i, c in enumerate(compiled):
        aggs.extend(_aggregates(i, c))
    row = flagged.agg(*aggs).first()
    assert row is not None
    found = row.asDict(recursive=False)
    for i, c in enumerate(compiled):
        c.metrics = rule_metrics(i, c, found, sample_size)
        if lists_sample(c, sample_size) and c.metrics[f"{c.map_metric}.unexpected_count"]:
            c.metrics[f"{c.map_metric}.unexpected_values"] = _sample(flagged, c, sample_size)
    return flagged, found


def validation_result(
    compiled: CompiledRule,
    expectation: Expectation,
    result_format: dict[str, Any],
    batch_id: str,
) -> ExpectationValidationResult:
    """GE's verdict on the compiled metrics: the expectation's own ``_validate``.

    Args:
        expectation: the suite's expectation (its id and meta go into the result).
        result_format: GE's result format (``BASIC`` with a ``partial_unexpected_count``).
        batch_id: GE's name of the batch (``<datasource>-<asset>``), as its results carry it.
    """
    judge = expectation_class(compiled.rule.expectation)(**compiled.kwargs)
    out = judge._validate(  # noqa: SLF001 - GE's verdict logic, fed with our metrics
        compiled.metrics, runtime_configuration={"result_format": result_format}
    )
    config = expectation.configuration
    kwargs = {"batch_id": batch_id, **config.kwargs, **compiled.kwargs}
    return ExpectationValidationResult(
        success=bool(out["success"]),
        expectation_config=ExpectationConfiguration(
            type=config.type,
            kwargs=kwargs,
            meta=config.meta,
            id=config.id,
            severity=config.severity,
        ),
        result=out.get("result", {}),
        exception_info={
            "raised_exception": False,
            "exception_traceback": None,
            "exception_message": None,
        },
    )


def _aggregates(i: int, c: CompiledRule) -> list[Column]:
    if c.metric is not None:
        if c.metric == ROW_COUNT:
            return []
        op = F.min if c.metric == "column.min" else F.max
        return [op(F.col(c.kwargs["column"])).alias(f"m{i}_value")]
    out = [_count_if(F.col(c.flag)).alias(f"m{i}_unexpected")]
    if c.domain is not None:
        out.append(_count_if(c.domain).alias(f"m{i}_domain"))
    elif c.rule.expectation not in NULL_CHECKS:
        out.append(_count_if(F.col(c.kwargs["column"]).isNull()).alias(f"m{i}_nulls"))
    return out


def _has_sample(c: CompiledRule, sample_size: int) -> bool:
    """Whether the rule's result lists unexpected values (a null check has none to list)."""
    return sample_size > 0 and c.rule.expectation != "expect_column_values_to_not_be_null"


def lists_sample(c: CompiledRule, sample_size: int) -> bool:
    """Whether the rule's result lists unexpected values (``sample_size > 0``): the row-level
    rules, but ``expect_column_values_to_not_be_null`` (its sample is nulls, from the count).
    :func:`evaluate` reads each such sample after the aggregation (:func:`_sample`), when the
    rule found unexpected rows; :mod:`quality.arrow_checks` collects the windowed rules' as
    it counts (``m{i}_values``)."""
    return _has_sample(c, sample_size) and c.row_level


def _sample(flagged: DataFrame, c: CompiledRule, sample_size: int) -> list[Any]:
    """The first ``sample_size`` unexpected values of a rule, in scan order (GE's ``limit``);
    a multicolumn rule's are dicts of its columns."""
    assert c.values is not None
    rows = flagged.where(F.col(c.flag)).select(c.values.alias("v")).limit(sample_size).collect()
    if c.rule.expectation in MULTICOLUMN:
        return [r["v"].asDict() for r in rows]
    return [r["v"] for r in rows]


def rule_metrics(
    i: int, c: CompiledRule, found: dict[str, Any], sample_size: int
) -> dict[str, Any]:
    """Rule ``i``'s GE metrics (``table.row_count``, ``<map metric>.unexpected_count``, ...: see
    the module docstring) from the aggregated row ``found`` (``__rows``, ``m{i}_unexpected``,
    ``m{i}_values``, ``m{i}_domain``, ``m{i}_nulls``, ``m{i}_value``, with Spark's nulls).

    A sample read after the aggregation (:func:`lists_sample`) is not in ``found``: the caller
    sets its ``<map metric>.unexpected_values``; ``expect_column_values_to_not_be_null``'s
    sample is one ``None`` per unexpected row (up to ``sample_size``), as GE's.
    """
    rows = int(found["__rows"])
    metrics: dict[str, Any] = {ROW_COUNT: rows}
    if c.metric is not None:
        if c.metric != ROW_COUNT:
            metrics[c.metric] = found[f"m{i}_value"]
        return metrics
    unexpected = int_or_none(found[f"m{i}_unexpected"])
    if unexpected is None and c.rule.expectation in WINDOWED:
        unexpected = 0  # GE counts a window condition's rows (count()), not a sum: 0, not None
    prefix = c.map_metric
    metrics[f"{prefix}.unexpected_count"] = unexpected
    if c.rule.expectation == "expect_column_values_to_not_be_null":
        values: list[Any] = [None] * min(unexpected or 0, sample_size)
    else:
        values = list(found.get(f"m{i}_values") or [])
        if c.rule.expectation in MULTICOLUMN:
            values = [v.asDict() for v in values]
    metrics[f"{prefix}.unexpected_values"] = values
    if c.rule.expectation in MULTICOLUMN:
        metrics[f"{prefix}.filtered_row_count"] = int(found[f"m{i}_domain"] or 0)
    elif c.rule.expectation not in NULL_CHECKS:
        metrics[NULL_COUNT] = int_or_none(found[f"m{i}_nulls"])
    return metrics


def _types_fit(expectation: str, kwargs: dict[str, Any], types: dict[str, DataType]) -> bool:
    """Whether the compiled predicate means what GE's does for these column types."""
    column = kwargs.get("column")
    kind = types.get(column) if isinstance(column, str) else None
    if expectation in _STRING_ONLY:
        return isinstance(kind, StringType)
    if expectation in _BETWEEN:
        bounds = [kwargs.get("min_value"), kwargs.get("max_value")]
        if isinstance(kind, NumericType):
            return all(b is None or _is_number(b) for b in bounds)
        if isinstance(kind, (TimestampType, TimestampNTZType, DateType)):
            from datetime import date

            return expectation == "expect_column_values_to_be_between" and all(
                b is None or isinstance(b, date) for b in bounds
            )
        return False
    if expectation in _SETS and kind is not None:
        return _set_fits(kwargs.get("value_set"), kind)
    return True


def _set_fits(values: Any, kind: DataType) -> bool:
    """Whether a value set compares with a column as it is: strings with a string column,
    numbers with a numeric one, booleans with a boolean one. Anything else Spark casts, and
    may fail to (``'PAID'`` as a number, in ANSI mode): GE runs such a rule and its error
    names the rule (``QualityConfigError``) instead of failing every rule of the table."""
    if not values:
        return True
    if isinstance(kind, StringType):
        return all(isinstance(v, str) for v in values)
    if isinstance(kind, NumericType):
        return all(_is_number(v) for v in values)
    if isinstance(kind, BooleanType):
        return all(isinstance(v, bool) for v in values)
    return False  # dates, timestamps, bytes: Spark would cast the values


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kept(kwargs: dict[str, Any], cols: list[Column]) -> Column:
    ignore = kwargs.get("ignore_row_if", "all_values_are_missing")
    if ignore == "any_value_is_missing":
        return _all([c.isNotNull() for c in cols])
    if ignore == "never":
        return F.lit(True)
    return ~_all([c.isNull() for c in cols])


def _count_if(cond: Column) -> Column:
    """GE's Spark count of a condition: a sum, so null (None) over an empty batch."""
    return F.sum(F.when(cond, F.lit(1)).otherwise(F.lit(0))).cast("long")


def int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _any(conds: Sequence[Column]) -> Column:
    out = F.lit(False)
    for cond in conds:
        out = out | cond
    return out


def _all(conds: Sequence[Column]) -> Column:
    out = F.lit(True)
    for cond in conds:
        out = out & cond
    return out
