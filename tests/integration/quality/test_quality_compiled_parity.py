"""Compiled expectations agree with Great Expectations: verdicts, counts, observed values, rows.

Each example draws a small silver-shaped batch and, for EVERY compiled expectation type, one
rule with drawn arguments. Great Expectations validates the batch (result format COMPLETE, the
unexpected rows named by a unique ``_row`` column); :mod:`quality.compiled` evaluates the same
rules in its one aggregation, judged by each expectation's own ``_validate``. Both must give the
same success, element count, unexpected count (and percentages), observed value, the same
unexpected sample (as a multiset when GE lists them all, else drawn from the unexpected values)
and the same set of unexpected rows.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import great_expectations as gx
import pytest
from great_expectations.data_context.types.base import ProgressBarsConfig
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import LongType, StructField, StructType

from quality.compiled import COMPILED_EXPECTATIONS, compile_rule, evaluate, validation_result
from quality.rules import parse_rules
from tests.support.quality_testkit import NOW, ORDER, SILVER_SCHEMA, order_row

pytestmark = pytest.mark.integration

SCHEMA = StructType([*SILVER_SCHEMA.fields, StructField("_row", LongType(), False)])
SAMPLE = 5
FORMAT = {"result_format": "BASIC", "partial_unexpected_count": SAMPLE}
TIMES = [datetime(1999, 12, 31, tzinfo=UTC), datetime(2020, 5, 1, tzinfo=UTC), NOW]

mostly = st.sampled_from([None, None, 0.5, 0.8])
# offsets beyond a double's exact integers: GE's model makes a be_between bound a float
BEYOND_DOUBLE = [2**53, 2**53 + 1, 2**53 + 2]


def _with_mostly(kwargs: dict[str, Any], value: float | None) -> dict[str, Any]:
    return kwargs if value is None else {**kwargs, "mostly": value}


@st.composite
def bounds(draw: Any, values: st.SearchStrategy[Any]) -> dict[str, Any]:
    lo, hi = draw(st.one_of(st.none(), values)), draw(st.one_of(st.none(), values))
    if lo is None and hi is None:
        lo = draw(values)
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    out: dict[str, Any] = {"min_value": lo, "max_value": hi}
    if draw(st.booleans()):
        out.update(strict_min=draw(st.booleans()), strict_max=draw(st.booleans()))
    return out


@st.composite
def column_between(draw: Any) -> dict[str, Any]:
    column, values = draw(
        st.sampled_from(
            [
                ("qty", st.integers(-2, 12)),
                ("amount", st.floats(-5, 50, allow_nan=False, allow_infinity=False)),
                ("_kafka_timestamp", st.sampled_from(TIMES)),
                ("_kafka_offset", st.sampled_from([0, 3, *BEYOND_DOUBLE])),
            ]
        )
    )
    return _with_mostly({"column": column, **draw(bounds(values))}, draw(mostly))


def _kwargs() -> dict[str, st.SearchStrategy[dict[str, Any]]]:
    nullable = st.sampled_from(["order_id", "qty", "email", "status"])
    statuses = st.lists(st.sampled_from(["NEW", "PAID", "LOST", "X"]), min_size=1, unique=True)
    texts = st.sampled_from(["order_id", "email"])
    regexes = st.sampled_from(["^o-", "@", "^[a-z]+$", "1", "^[^@]+@[^@]+$"])
    numeric = st.sampled_from([("qty", st.integers(-2, 12)), ("amount", st.integers(-5, 50))])

    def aggregate(draw_column: Any) -> st.SearchStrategy[dict[str, Any]]:
        return draw_column.flatmap(lambda cv: bounds(cv[1]).map(lambda b: {"column": cv[0], **b}))

    return {
        "expect_column_values_to_not_be_null": st.builds(
            lambda c, m: _with_mostly({"column": c}, m), nullable, mostly
        ),
        "expect_column_values_to_be_null": st.builds(
            lambda c, m: _with_mostly({"column": c}, m), nullable, mostly
        ),
        "expect_column_values_to_be_in_set": st.builds(
            lambda v, m: _with_mostly({"column": "status", "value_set": v}, m), statuses, mostly
        ),
        "expect_column_values_to_not_be_in_set": st.builds(
            lambda v, m: _with_mostly({"column": "status", "value_set": v}, m), statuses, mostly
        ),
        "expect_column_values_to_be_between": column_between(),
        "expect_column_value_lengths_to_be_between": st.builds(
            lambda c, b: {"column": c, **b},
            texts,
            bounds(st.one_of(st.integers(0, 8), st.sampled_from([0.5, 1.5, 2.9, 4.2]))),
        ),
        "expect_column_value_lengths_to_equal": st.builds(
            lambda c, v: {"column": c, "value": v}, texts, st.integers(0, 6)
        ),
        "expect_column_values_to_match_regex": st.builds(
            lambda c, r, m: _with_mostly({"column": c, "regex": r}, m), texts, regexes, mostly
        ),
        "expect_column_values_to_not_match_regex": st.builds(
            lambda c, r: {"column": c, "regex": r}, texts, regexes
        ),
        "expect_column_values_to_be_unique": st.builds(
            lambda c, m: _with_mostly({"column": c}, m), nullable, mostly
        ),
        "expect_compound_columns_to_be_unique": st.builds(
            lambda cols, ignore: {"column_list": cols, "ignore_row_if": ignore},
            st.sampled_from(
                [
                    ["_kafka_topic", "_kafka_partition", "_kafka_offset"],
                    ["order_id", "status"],
                    ["email", "qty"],
                ]
            ),
            st.sampled_from(["all_values_are_missing", "any_value_is_missing", "never"]),
        ),
        "expect_table_row_count_to_be_between": bounds(st.integers(0, 10)).map(
            lambda b: {k: v for k, v in b.items() if not k.startswith("strict")}
        ),
        "expect_table_row_count_to_equal": st.builds(lambda v: {"value": v}, st.integers(0, 10)),
        "expect_column_min_to_be_between": aggregate(numeric),
        "expect_column_max_to_be_between": aggregate(numeric),
    }


KWARGS = _kwargs()

row = st.fixed_dictionaries(
    {
        "order_id": st.sampled_from([None, "o-1", "o-2", "abc", "o-10"]),
        "status": st.sampled_from([None, "NEW", "PAID", "LOST"]),
        "qty": st.one_of(st.none(), st.integers(-2, 12)),
        "amount": st.one_of(st.none(), st.floats(-5, 50, allow_nan=False, allow_infinity=False)),
        "email": st.sampled_from([None, "a@b.c", "bad", "x@y", "a@b@c"]),
        "_kafka_partition": st.integers(0, 1),
        "_kafka_offset": st.one_of(st.integers(0, 4), st.sampled_from(BEYOND_DOUBLE)),
        "_kafka_timestamp": st.sampled_from([None, *TIMES]),
    }
)


@pytest.fixture(scope="module")
def ge_batches():
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    asset = context.data_sources.add_spark("parity", persist=False).add_dataframe_asset("rows")
    definition = asset.add_batch_definition_whole_dataframe("all")
    return lambda df: definition.get_batch(batch_parameters={"dataframe": df})


def test_every_compiled_type_is_drawn():
    assert set(KWARGS) == COMPILED_EXPECTATIONS


def _unexpected_sample_agrees(ge_result: dict[str, Any], ours: dict[str, Any], values: Any) -> None:
    """Equal samples when GE lists every unexpected value, else both drawn from the same values."""
    theirs, mine = ge_result.get("partial_unexpected_list"), ours.get("partial_unexpected_list")
    assert (theirs is None) == (mine is None)
    if theirs is None:
        return
    key = lambda v: json.dumps(v, default=str, sort_keys=True)  # noqa: E731
    assert len(mine) == len(theirs)
    if (ge_result["unexpected_count"] or 0) <= SAMPLE:
        assert Counter(map(key, mine)) == Counter(map(key, theirs))
    else:
        assert set(map(key, mine)) <= set(map(key, values))


def _raised(info: dict[str, Any]) -> bool:
    """Whether GE's ``exception_info`` reports an error: its own, or (in a suite run, where a
    failed metric is reported under the metric's id) one of a metric's."""
    nested = [v for v in info.values() if isinstance(v, dict)]
    return bool(info.get("raised_exception")) or any(v.get("raised_exception") for v in nested)


# Each example checks every compiled type at once, GE against the compiled form (~5 s an
# example on 2 cores): 10 examples are 150 comparisons per run, and every run draws new ones.
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    rows=st.lists(row, max_size=10),
    kwargs=st.fixed_dictionaries(KWARGS),
)
def test_compiled_rules_give_ge_verdicts_counts_and_rows(spark, ge_batches, rows, kwargs):
    _same_as_ge(spark, ge_batches, rows, kwargs)


def test_numbers_ge_converts_are_compared_as_ge_compares_them(spark, ge_batches):
    """A be_between bound beyond a double's exact integers, and a fractional length bound:
    GE's model converts both (``rules.judged_kwargs``); compiled as written, the rows near them
    were judged otherwise."""
    rows = [
        {"_kafka_offset": offset, "order_id": order_id}
        for offset, order_id in zip(BEYOND_DOUBLE, ["a", "ab", "abc"], strict=True)
    ]
    kwargs = {
        "expect_column_values_to_be_between": {"column": "_kafka_offset", "min_value": 2**53 + 1},
        "expect_column_value_lengths_to_be_between": {"column": "order_id", "min_value": 1.5},
    }
    _same_as_ge(spark, ge_batches, rows, kwargs)


def _same_as_ge(spark, ge_batches, rows, kwargs):
    names = SILVER_SCHEMA.fieldNames()
    data = [
        tuple({**order_row(i), **r, "_row": i}[n] for n in [*names, "_row"])
        for i, r in enumerate(rows)
    ]
    df = spark.createDataFrame(data, schema=SCHEMA)
    # parsed as the configuration is
    rules = parse_rules(
        [{"message_type": ORDER, "expectation": name, "kwargs": kw} for name, kw in kwargs.items()]
    )
    compiled = [compile_rule(rule, df.schema) for rule in rules]
    assert all(c is not None for c in compiled), [
        r.expectation for r, c in zip(rules, compiled, strict=True) if c is None
    ]
    flagged, _ = evaluate(df, compiled, SAMPLE)
    flag_names = [c.flag for c in compiled if c.flag]
    marks = flagged.select("_row", *flag_names).collect()

    # GE validates them as one suite (its metrics computed together, as a suite run does), each
    # expectation's result found by the rule its meta names
    expectations = [rule.to_expectation() for rule in rules]
    for i, expectation in enumerate(expectations):
        expectation.meta = {"rule": i}
    suite = gx.ExpectationSuite(name="parity", expectations=expectations)
    validated = ge_batches(df).validate(
        suite,
        result_format={
            "result_format": "COMPLETE",
            "partial_unexpected_count": SAMPLE,
            "unexpected_index_column_names": ["_row"],
            "return_unexpected_index_query": False,
        },
    )
    by_rule = {r.expectation_config.meta["rule"]: r for r in validated.results}
    assert len(validated.results) == len(rules) and sorted(by_rule) == list(range(len(rules)))
    for i, (rule, c) in enumerate(zip(rules, compiled, strict=True)):
        expectation, theirs = expectations[i], by_rule[i]
        assert not _raised(theirs.exception_info), theirs.exception_info
        ours = validation_result(c, expectation, FORMAT, "parity-rows")
        what = f"{rule.expectation_id} on {len(rows)} rows"
        assert ours.success == theirs.success, what
        got, want = ours.result, theirs.result
        for key in ("element_count", "unexpected_count", "unexpected_percent", "missing_count"):
            assert got.get(key) == want.get(key), f"{what}: {key}"
        assert got.get("observed_value") == want.get("observed_value"), what
        if c.flag:
            flagged_rows = {m["_row"] for m in marks if m[c.flag]}
            ge_rows = {item["_row"] for item in want.get("unexpected_index_list") or []}
            assert flagged_rows == ge_rows, what
            _unexpected_sample_agrees(want, got, want.get("unexpected_list") or [])
