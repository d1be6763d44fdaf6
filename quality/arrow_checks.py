"""Compiled rules evaluated over a ``pyarrow.Table`` in the driver: Spark's verdicts, no Spark job.

:func:`evaluate_arrow` is :func:`quality.compiled.evaluate` for a small batch the driver holds as
Arrow: one pass over the rows gives each row-level rule's mask of unexpected rows (Spark's
``coalesce(predicate, false)``) and the ``found`` row the Spark aggregation gives (``__rows``,
``__any_quarantine``, ``m{i}_unexpected``, ``m{i}_domain``, ``m{i}_nulls``, ``m{i}_value``,
with Spark's nulls: a count over no rows is None, as a ``sum``; the min of no values is None),
plus the uniqueness rules' samples (``m{i}_values``, collected as it counts: Spark reads them
after, below), from which :func:`quality.compiled.rule_metrics` fills each rule's
``metrics``; the other samples are the first ``sample_size`` unexpected values in row order
(Spark's ``limit`` over a local relation). Values are Spark's collected values (a timestamp is the naive local ``datetime``
PySpark's ``TimestampType.fromInternal`` gives, a compound key a ``Row``).

The rules come from ``compile_rule(..., columns=False)``: the compiled decision, without Spark
columns (building them costs py4j calls). It answers None (the caller uses Spark) unless every
rule means here exactly what it means in Spark: the column is of a kind
:mod:`quality.arrow_columns` reads as Spark does (its Arrow type the one Spark's type maps to)
and one the rule's comparison is modelled for:

- null checks: any column (``to_be_null`` lists values: a known kind);
- in set / not in set: string (str values), integer (int values), double (int or float values,
  no NaN or -0.0); no null in the set;
- between: integer or double against int / float bounds, compared in the type Spark widens to
  (a long against a float bound as a double); a timestamp against tz-aware ``datetime`` bounds
  (instants, years from 1900: no calendar rebasing);
- lengths: string (characters, as Spark's ``length``);
- regex: string, a pattern of ``quality.regex_subset.python_regex``'s subset;
- unique, compound unique: any known kind; min / max: integer, float, double, decimal;
- a float column holding NaN or -0.0 (Spark's ordering and grouping normalise them) is
  answered only by the null checks.

The one difference from Spark: the windowed rules' sample (``m{i}_values``, GE's
``partial_unexpected_list``, hence a failed rule's ``observed_value`` text) of
``expect_column_values_to_be_unique`` and ``expect_compound_columns_to_be_unique`` is the
first ``sample_size`` duplicates in row order; Spark's is the first its window gives, in the
order of its shuffle, grouped by value. With at most ``sample_size``
unexpected rows the two list the same values, maybe in another order; with more, they may list
other duplicates. Every count, verdict, mask and the other rules' samples are equal.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
from pyspark.sql import Row
from pyspark.sql import types as T  # noqa: N812

from quality.arrow_columns import Columns, Unsupported, odd_float
from quality.compiled import (
    FLAG,
    MULTICOLUMN,
    NULL_CHECKS,
    ROW_COUNT,
    WINDOWED,
    CompiledRule,
    lists_sample,
    rule_metrics,
)
from quality.regex_subset import has_line_terminator, line_sensitive, python_regex

# Unsupported: what evaluate_arrow leaves to Spark, named here too
__all__ = ["ArrowChecks", "Unsupported", "evaluate_arrow"]

_INT64 = (-(2**63), 2**63 - 1)


@dataclass
class ArrowChecks:
    """What :func:`evaluate_arrow` found: the aggregation row and each row-level rule's mask."""

    found: dict[str, Any]
    masks: dict[str, pa.BooleanArray]  # by CompiledRule.flag


def evaluate_arrow(
    rows: pa.Table, schema: T.StructType, compiled: Sequence[CompiledRule], sample_size: int
) -> ArrowChecks | None:
    """``compiled.evaluate`` over Arrow rows of ``schema``; fills ``rule.metrics`` in place.

    The metrics are Spark's but for the uniqueness rules' sample (its order and, beyond
    ``sample_size`` duplicates, its content: see the module docstring). None (no rule's metrics
    touched) when some rule cannot be answered here exactly.
    """
    columns = Columns(rows, schema)
    try:
        marks = [_evaluate(c, columns) for c in compiled]
    except Unsupported:
        return None
    n = rows.num_rows
    found: dict[str, Any] = {"__rows": n}
    quarantine = [
        m
        for c, m in zip(compiled, marks, strict=True)
        if m is not None and c.rule.policy == "quarantine"
    ]
    found["__any_quarantine"] = _count_if(n, [any(f) for f in zip(*quarantine, strict=True)])
    masks: dict[str, pa.BooleanArray] = {}
    for i, (c, mask) in enumerate(zip(compiled, marks, strict=True)):
        found.update(_aggregates(i, c, mask, columns, sample_size))
        if mask is not None:
            c.flag = FLAG.format(i)
            masks[c.flag] = pa.array(mask, pa.bool_())
    for i, c in enumerate(compiled):
        c.metrics = rule_metrics(i, c, found, sample_size)
        if _sampled_later(c, sample_size) and c.metrics[f"{c.map_metric}.unexpected_count"]:
            sample = _first(marks[i], columns.get(c.kwargs["column"]).spark, sample_size)
            c.metrics[f"{c.map_metric}.unexpected_values"] = sample
    return ArrowChecks(found, masks)


# -- rules ---------------------------------------------------------------------------------------


def _evaluate(c: CompiledRule, columns: Columns) -> list[bool] | None:
    """The rule's unexpected-row mask (None for an aggregate expectation)."""
    if not c.row_level:
        if c.metric is not None and c.metric != ROW_COUNT:
            columns.get(c.kwargs["column"], frozenset({"int", "float", "double", "decimal"}))
            columns.get(c.kwargs["column"]).comparable()
        return None
    build = _MASKS.get(c.rule.expectation)
    if build is None:
        raise Unsupported
    return build(c.kwargs, columns)


def _not_null(kw: dict[str, Any], columns: Columns) -> list[bool]:
    return columns.get(kw["column"], None).nulls


def _null(kw: dict[str, Any], columns: Columns) -> list[bool]:
    return [not n for n in columns.get(kw["column"]).nulls]


def _in_set(kw: dict[str, Any], columns: Columns) -> list[bool]:
    if kw.get("value_set") is None:  # GE: vacuously true
        return [False] * len(columns.get(kw["column"], None).nulls)
    column = columns.get(kw["column"], frozenset({"string", "int", "double"}))
    found = _value_set(column.kind, kw["value_set"])
    return [v is not None and v not in found for v in column.comparable()]


def _not_in_set(kw: dict[str, Any], columns: Columns) -> list[bool]:
    column = columns.get(kw["column"], frozenset({"string", "int", "double"}))
    found = _value_set(column.kind, kw.get("value_set") or [])
    return [v is not None and v in found for v in column.comparable()]


def _value_set(kind: str | None, values: Any) -> frozenset[Any]:
    """The set as Spark's ``isin`` compares it with a column of ``kind`` (the column's type)."""
    out: set[Any] = set()
    for v in values:
        if kind == "string" and isinstance(v, str):
            out.add(v)
        elif kind in ("int", "double") and _is_int(v):
            out.add(float(v) if kind == "double" else v)
        elif kind == "double" and isinstance(v, float) and not odd_float(v):
            out.add(v)
        else:
            raise Unsupported
    return frozenset(out)


def _between(kw: dict[str, Any], columns: Columns) -> list[bool]:
    column = columns.get(kw["column"], frozenset({"int", "double", "timestamp"}))
    return _outside(column.kind, column.comparable(), kw)


def _lengths_between(kw: dict[str, Any], columns: Columns) -> list[bool]:
    return _outside("int", _lengths(kw, columns), kw)


def _lengths_equal(kw: dict[str, Any], columns: Columns) -> list[bool]:
    expected = _bound("int", kw["value"])
    return [n is not None and n != expected for n in _lengths(kw, columns)]


def _lengths(kw: dict[str, Any], columns: Columns) -> list[int | None]:
    """Spark's ``length`` of a string: its characters (code points), as Python's ``len``."""
    values = columns.get(kw["column"], frozenset({"string"})).values
    return [None if v is None else len(v) for v in values]


def _match_regex(kw: dict[str, Any], columns: Columns) -> list[bool]:
    return [m is False for m in _matches(kw, columns)]


def _not_match_regex(kw: dict[str, Any], columns: Columns) -> list[bool]:
    return [m is True for m in _matches(kw, columns)]


def _matches(kw: dict[str, Any], columns: Columns) -> list[bool | None]:
    """Spark's ``rlike`` (Java's ``find``) of each string; None for nulls."""
    pattern = kw.get("regex")
    if not isinstance(pattern, str):
        raise Unsupported
    compiled = python_regex(pattern)
    if compiled is None:
        raise Unsupported
    values = columns.get(kw["column"], frozenset({"string"})).values
    if line_sensitive(pattern) and any(v is not None and has_line_terminator(v) for v in values):
        raise Unsupported  # Java's "." and "$" know more line terminators than Python's
    return [None if v is None else compiled.search(v) is not None for v in values]


def _unique(kw: dict[str, Any], columns: Columns) -> list[bool]:
    values = columns.get(kw["column"]).comparable()
    counts = Counter(v for v in values if v is not None)
    return [v is not None and counts[v] > 1 for v in values]


def _compound_unique(kw: dict[str, Any], columns: Columns) -> list[bool]:
    keys = list(zip(*(columns.get(c).comparable() for c in kw["column_list"]), strict=True))
    counts = Counter(keys)  # over every row, as Spark's window (quality.predicates)
    return [k and counts[key] > 1 for k, key in zip(_kept(kw, keys), keys, strict=True)]


def _kept(kw: dict[str, Any], keys: list[tuple[Any, ...]]) -> list[bool]:
    """Rows ``ignore_row_if`` keeps (GE's domain of a multicolumn rule)."""
    ignore = kw.get("ignore_row_if", "all_values_are_missing")
    if ignore == "any_value_is_missing":
        return [all(v is not None for v in key) for key in keys]
    if ignore == "never":
        return [True] * len(keys)
    return [not all(v is None for v in key) for key in keys]


_MASKS: dict[str, Callable[[dict[str, Any], Columns], list[bool]]] = {
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


# -- comparisons -----------------------------------------------------------------------------


def _outside(kind: str | None, values: list[Any], kw: dict[str, Any]) -> list[bool]:
    """Non-null values outside ``[min_value, max_value]`` (``strict_*``: open ends), compared
    as Spark compares the column with each bound's literal."""
    tests: list[Callable[[Any], bool]] = []
    lo, hi = kw.get("min_value"), kw.get("max_value")
    if lo is not None:
        tests.append(_compare(kind, lo, strict=bool(kw.get("strict_min")), above=True))
    if hi is not None:
        tests.append(_compare(kind, hi, strict=bool(kw.get("strict_max")), above=False))
    return [v is not None and not all(t(v) for t in tests) for v in values]


def _compare(kind: str | None, bound: Any, *, strict: bool, above: bool) -> Callable[[Any], bool]:
    """``value > bound`` (``>=`` unless strict; ``<`` / ``<=`` if not ``above``) in Spark's
    common type of the column and the bound's literal."""
    b = _bound(kind, bound)
    widen = float if kind == "int" and isinstance(b, float) else _same  # long vs double: double
    if above:
        return (lambda v: widen(v) > b) if strict else (lambda v: widen(v) >= b)
    return (lambda v: widen(v) < b) if strict else (lambda v: widen(v) <= b)


def _bound(kind: str | None, bound: Any) -> Any:
    """A bound as Spark's literal of it compares with a column of ``kind``."""
    if kind == "timestamp":
        if not isinstance(bound, datetime) or bound.tzinfo is None or bound.year < 1900:
            raise Unsupported  # naive (local time) or rebased (old) instants: Spark's to judge
        return T.TimestampType().toInternal(bound)
    if kind in ("int", "double") and _is_int(bound):
        return float(bound) if kind == "double" else bound
    if kind in ("int", "double") and isinstance(bound, float) and not math.isnan(bound):
        return bound
    raise Unsupported


def _same(value: Any) -> Any:
    return value


def _is_int(value: Any) -> bool:
    return (
        isinstance(value, int) and not isinstance(value, bool) and _INT64[0] <= value <= _INT64[1]
    )


# -- aggregates ------------------------------------------------------------------------------


def _aggregates(
    i: int, c: CompiledRule, mask: list[bool] | None, columns: Columns, sample_size: int
) -> dict[str, Any]:
    """The rule's ``m{i}_...`` entries of Spark's aggregation row (``compiled.evaluate``), and
    a windowed rule's sample (``m{i}_values``)."""
    n = columns.rows
    if c.metric is not None:
        if c.metric == ROW_COUNT:
            return {}
        present = [v for v in columns.get(c.kwargs["column"]).values if v is not None]
        pick = min if c.metric == "column.min" else max
        return {f"m{i}_value": pick(present) if present else None}
    assert mask is not None
    out: dict[str, Any] = {f"m{i}_unexpected": _count_if(n, mask)}
    if lists_sample(c, sample_size) and c.rule.expectation in WINDOWED:
        out[f"m{i}_values"] = _first(mask, _values_of(c, columns), sample_size)
    if c.rule.expectation in MULTICOLUMN:
        keys = zip(*(columns.get(col).values for col in c.kwargs["column_list"]), strict=True)
        out[f"m{i}_domain"] = _count_if(n, _kept(c.kwargs, list(keys)))
    elif c.rule.expectation not in NULL_CHECKS:
        out[f"m{i}_nulls"] = _count_if(n, columns.get(c.kwargs["column"], None).nulls)
    return out


def _sampled_later(c: CompiledRule, sample_size: int) -> bool:
    """Whether the rule's sample is read after the counts (the windowed rules' is collected
    as they count: :func:`_aggregates`)."""
    return lists_sample(c, sample_size) and c.rule.expectation not in WINDOWED


def _values_of(c: CompiledRule, columns: Columns) -> Callable[[int], Any]:
    """Row i's value in a windowed rule's sample, as Spark reads it (a ``Row`` of a key)."""
    assert c.rule.expectation in WINDOWED
    if "column_list" not in c.kwargs:
        return columns.get(c.kwargs["column"]).spark
    names = list(c.kwargs["column_list"])
    key = Row(*names)
    return lambda i: key(*(columns.get(name).spark(i) for name in names))


def _first(mask: list[bool] | None, value: Callable[[int], Any], size: int) -> list[Any]:
    """The values of the first ``size`` flagged rows, in row order."""
    assert mask is not None
    out: list[Any] = []
    for i, flagged in enumerate(mask):
        if len(out) >= size:
            break
        if flagged:
            out.append(value(i))
    return out


def _count_if(rows: int, flags: Sequence[bool]) -> int | None:
    """Spark's ``sum(if(cond, 1, 0))``: None over no rows."""
    return None if rows == 0 else sum(1 for f in flags if f)
