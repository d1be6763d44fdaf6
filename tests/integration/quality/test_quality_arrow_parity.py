"""``QualityChecker.validate_arrow`` gives ``validate``'s verdicts and rows on the same rows.

Each example draws a small silver-shaped batch and, for every expectation type
``validate_arrow`` answers, one configured rule with drawn arguments and policy (on top of the
default suite, with its ``$PARAMETER`` bound from the reference time). ``validate`` judges
``spark.createDataFrame(rows, schema)``, ``validate_arrow`` the Arrow table of the same rows:
same ``fail_batch``, same rows quarantined (by a ``_row`` id column) with the same reasons, and
the same results, every field but ``validated_at`` and, for the two uniqueness rules
(``expect_column_values_to_be_unique``, ``expect_compound_columns_to_be_unique``), the sample
of duplicates in ``observed_value`` (see :mod:`quality.arrow_checks`: Arrow lists them in row
order, Spark in shuffle order). That sample is checked to be the same multiset when the rule
has at most 5 unexpected rows (it lists every duplicate), else as many values, all duplicates.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType

from quality.checker import QualityChecker
from quality.compiled import COMPILED_EXPECTATIONS
from quality.regex_subset import python_regex
from quality.rules import TIMESTAMP_MAX_SLACK, parse_rules
from tests.support.quality_testkit import NOW, ORDER, SILVER_SCHEMA, TABLE, order_row

pytestmark = pytest.mark.integration

SCHEMA = StructType([*SILVER_SCHEMA.fields, StructField("_row", LongType(), False)])
ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")
SAMPLE = 5
EMAIL = r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$"
BOUND = NOW + TIMESTAMP_MAX_SLACK  # the default suite's max Kafka timestamp
TIMES = [
    datetime(1999, 12, 31, tzinfo=UTC),
    datetime(2000, 1, 1, tzinfo=UTC),
    NOW,
    BOUND,
    BOUND + timedelta(microseconds=1),
]
WINDOWED = ("expect_column_values_to_be_unique", "expect_compound_columns_to_be_unique")

mostly = st.sampled_from([None, None, 0.5, 0.8])
row_policy = st.sampled_from(["warn", "quarantine", "fail"])
floats = st.floats(-5, 50, allow_nan=False, allow_infinity=False).map(lambda x: x + 0.0)  # no -0.0


def _with_mostly(kwargs: dict[str, Any], value: float | None) -> dict[str, Any]:
    return kwargs if value is None else {**kwargs, "mostly": value}


@st.composite
def bounds(draw: Any, values: st.SearchStrategy[Any], strict: bool = True) -> dict[str, Any]:
    lo, hi = draw(st.one_of(st.none(), values)), draw(st.one_of(st.none(), values))
    if lo is None and hi is None:
        lo = draw(values)
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    out: dict[str, Any] = {"min_value": lo, "max_value": hi}
    if strict and draw(st.booleans()):
        out.update(strict_min=draw(st.booleans()), strict_max=draw(st.booleans()))
    return out


def _between() -> st.SearchStrategy[dict[str, Any]]:
    columns = st.sampled_from(
        [
            ("qty", st.one_of(st.integers(-2, 12), floats)),  # int column, int or float bounds
            ("amount", st.one_of(st.integers(-5, 50), floats)),
            ("_kafka_offset", st.one_of(st.integers(0, 4), st.sampled_from([0.5, 3.0]))),
            ("_kafka_timestamp", st.sampled_from(TIMES)),
        ]
    )
    return columns.flatmap(
        lambda cv: st.builds(
            lambda b, m: _with_mostly({"column": cv[0], **b}, m), bounds(cv[1]), mostly
        )
    )


def _kwargs() -> dict[str, st.SearchStrategy[dict[str, Any]]]:
    nullable = st.sampled_from(["order_id", "qty", "email", "status", "amount"])
    statuses = st.lists(st.sampled_from(["NEW", "PAID", "LOST", "X"]), min_size=1, unique=True)
    texts = st.sampled_from(["order_id", "email"])
    regexes = st.sampled_from([EMAIL, "^o-", "@", "^[a-z]+$", "1", "^[^@]+@[^@]+$", "o-.?1", "a|b"])
    numeric = st.sampled_from([("qty", st.integers(-2, 12)), ("amount", floats)])

    def aggregate(draw_column: Any) -> st.SearchStrategy[dict[str, Any]]:
        return draw_column.flatmap(
            lambda cv: bounds(cv[1], strict=False).map(lambda b: {"column": cv[0], **b})
        )

    def column(c: Any, m: Any) -> dict[str, Any]:
        return _with_mostly({"column": c}, m)

    return {
        "expect_column_values_to_not_be_null": st.builds(column, nullable, mostly),
        "expect_column_values_to_be_null": st.builds(column, nullable, mostly),
        "expect_column_values_to_be_in_set": st.one_of(
            st.builds(
                lambda v, m: _with_mostly({"column": "status", "value_set": v}, m), statuses, mostly
            ),
            st.builds(
                lambda v: {"column": "qty", "value_set": v},
                st.lists(st.integers(0, 5), min_size=1, unique=True),
            ),
            st.builds(
                lambda v: {"column": "amount", "value_set": v},
                st.lists(st.one_of(st.integers(10, 14), st.just(11.0)), min_size=1, unique=True),
            ),
        ),
        "expect_column_values_to_not_be_in_set": st.builds(
            lambda v, m: _with_mostly({"column": "status", "value_set": v}, m), statuses, mostly
        ),
        "expect_column_values_to_be_between": _between(),
        "expect_column_value_lengths_to_be_between": st.builds(
            lambda c, b: {"column": c, **b}, texts, bounds(st.integers(0, 8))
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
        "expect_column_values_to_be_unique": st.builds(column, nullable, mostly),
        "expect_compound_columns_to_be_unique": st.builds(
            lambda cols, ignore: {"column_list": cols, "ignore_row_if": ignore},
            st.sampled_from(
                [  # (the default suite has the Kafka key's; GE's suite dedups a twin)
                    ["_kafka_topic", "_kafka_offset"],
                    ["order_id", "status"],
                    ["email", "qty"],
                ]
            ),
            st.sampled_from(["all_values_are_missing", "any_value_is_missing", "never"]),
        ),
        "expect_table_row_count_to_be_between": bounds(st.integers(0, 10), strict=False),
        "expect_table_row_count_to_equal": st.builds(lambda v: {"value": v}, st.integers(0, 10)),
        "expect_column_min_to_be_between": aggregate(numeric),
        "expect_column_max_to_be_between": aggregate(numeric),
    }


KWARGS = _kwargs()
ROW_LEVEL_POLICIES = {
    name: row_policy
    if not name.startswith(("expect_table", "expect_column_m"))
    else st.sampled_from(["warn", "fail"])
    for name in KWARGS
}

row = st.fixed_dictionaries(
    {
        "order_id": st.sampled_from([None, "o-1", "o-2", "abc", "o-10", "ö-1"]),
        "status": st.sampled_from([None, "NEW", "PAID", "LOST"]),
        "qty": st.one_of(st.none(), st.integers(-2, 12)),
        "amount": st.one_of(st.none(), floats, st.sampled_from([10.0, 11.0, 12.0])),
        "email": st.sampled_from([None, "a@b.c", "a@b.co", "bad", "x@y", "a@b@c", "u é@x.org"]),
        "_kafka_topic": st.sampled_from(["shop.orders", "shop.orders", None]),
        "_kafka_partition": st.integers(0, 1),
        "_kafka_offset": st.integers(0, 4),
        "_kafka_timestamp": st.sampled_from([None, *TIMES]),
    }
)


def test_every_compiled_type_is_drawn():
    assert set(KWARGS) == COMPILED_EXPECTATIONS


def _batch(spark, rows: list[dict[str, Any]]):
    full = [{**order_row(i), **r, "_row": i} for i, r in enumerate(rows)]
    names = SCHEMA.fieldNames()
    df = spark.createDataFrame([tuple(r[n] for n in names) for r in full], schema=SCHEMA)
    return full, df, pa.Table.from_pylist(full, schema=ARROW_SCHEMA)


def _checker(spark, tmp_path_factory, raw: list[dict[str, Any]]) -> QualityChecker:
    lake = tmp_path_factory.mktemp("arrow-parity") / "lakehouse"
    return QualityChecker(spark, str(lake), parse_rules(raw))


def _sample_of(observed: str | None) -> list[Any] | None:
    prefix = "unexpected e.g. "
    return json.loads(observed[len(prefix) :]) if observed and observed.startswith(prefix) else None


def _key(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)


def _duplicates(rows: list[dict[str, Any]], kwargs: dict[str, Any]) -> set[str]:
    """The values a uniqueness rule may list: those of rows sharing the key (its oracle)."""
    names = kwargs.get("column_list") or [kwargs["column"]]
    keys = [tuple(r[n] for n in names) for r in rows]
    counts = Counter(keys)
    if "column" in kwargs:
        ignore = "any_value_is_missing"  # a column map rule: nulls are not in its domain
    else:
        ignore = kwargs.get("ignore_row_if", "all_values_are_missing")
    out = set()
    for key in keys:
        if counts[key] < 2 or (ignore == "any_value_is_missing" and None in key):
            continue
        if ignore == "all_values_are_missing" and all(v is None for v in key):
            continue
        if "column_list" in kwargs:
            out.add(_key(dict(zip(names, key, strict=True))))
        else:
            out.add(_key(key[0]))
    return out


def _assert_same(spark_outcome, arrow_outcome, rows, rules_by_id) -> None:
    assert arrow_outcome is not None
    assert arrow_outcome.fail_batch == spark_outcome.fail_batch
    assert arrow_outcome.rows_checked == spark_outcome.rows_checked
    assert arrow_outcome.rows_quarantined == spark_outcome.rows_quarantined
    assert (arrow_outcome.table, arrow_outcome.message_type, arrow_outcome.batch_id) == (
        spark_outcome.table,
        spark_outcome.message_type,
        spark_outcome.batch_id,
    )
    assert len(arrow_outcome.results) == len(spark_outcome.results)
    for mine, theirs in zip(arrow_outcome.results, spark_outcome.results, strict=True):
        got = dataclasses.asdict(mine) | {"validated_at": None}
        want = dataclasses.asdict(theirs) | {"validated_at": None}
        if mine.expectation_type in WINDOWED and got != want:
            a, b = _sample_of(got.pop("observed_value")), _sample_of(want.pop("observed_value"))
            assert a is not None and b is not None and len(a) == len(b), mine.expectation
            if (mine.unexpected_count or 0) <= SAMPLE:
                assert Counter(map(_key, a)) == Counter(map(_key, b)), mine.expectation
            else:
                kwargs = rules_by_id[mine.expectation]
                assert set(map(_key, a)) <= _duplicates(rows, kwargs), mine.expectation
        assert got == want, mine.expectation
    spark_failed = {
        r["_row"]: r["reason"] for r in spark_outcome.failed.select("_row", "reason").collect()
    }
    ids = [r["_row"] for r in rows]
    flagged = [i for i, f in zip(ids, arrow_outcome.failed.to_pylist(), strict=True) if f]
    assert arrow_outcome.failed.null_count == 0
    assert dict(zip(flagged, arrow_outcome.reasons, strict=True)) == spark_failed


def _both(spark, checker, rows, batch_id=7):
    full, df, table = _batch(spark, rows)
    where = {"message_type": ORDER, "table": TABLE, "batch_id": batch_id, "reference_time": NOW}
    spark_outcome = checker.validate(df, **where)
    arrow_outcome = checker.validate_arrow(table, SCHEMA, **where)
    return full, spark_outcome, arrow_outcome


def _ids(checker) -> dict[str, dict[str, Any]]:
    return {r.expectation_id: dict(r.kwargs) for r in checker.rules_for(ORDER)}


# ~2.5-4 s an example, nearly all of it Spark's (validate of ~20 rules: aggregation, samples,
# split); 7 examples keep this file under a minute on a loaded 2-core machine (49 s measured).
@settings(
    max_examples=7,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(
    rows=st.lists(row, max_size=10),
    kwargs=st.fixed_dictionaries(KWARGS),
    policies=st.fixed_dictionaries(ROW_LEVEL_POLICIES),
)
def test_validate_arrow_gives_validate_results_verdict_and_rows(
    spark, tmp_path_factory, rows, kwargs, policies
):
    raw = [
        {"message_type": ORDER, "expectation": name, "kwargs": kw, "policy": policies[name]}
        for name, kw in kwargs.items()
    ]
    checker = _checker(spark, tmp_path_factory, raw)
    full, spark_outcome, arrow_outcome = _both(spark, checker, rows)
    _assert_same(spark_outcome, arrow_outcome, full, _ids(checker))


def _rule(expectation: str, policy: str = "warn", **kwargs: Any) -> dict[str, Any]:
    return {"message_type": ORDER, "expectation": expectation, "kwargs": kwargs, "policy": policy}


def test_empty_batch_and_skipped_rules(spark, tmp_path_factory):
    raw = [
        _rule(
            "expect_column_values_to_be_in_set", "quarantine", column="status", value_set=["PAID"]
        ),
        _rule("expect_column_values_to_be_unique", column="qty"),
        _rule("expect_column_max_to_be_between", column="amount", min_value=0),
        _rule("expect_table_row_count_to_be_between", "fail", min_value=0, max_value=5),
        _rule("expect_column_values_to_not_be_null", "fail", column="coupon"),  # not in the batch
    ]
    checker = _checker(spark, tmp_path_factory, raw)
    for rows in ([], [{"status": "X", "qty": 1}, {"qty": 1}]):
        full, spark_outcome, arrow_outcome = _both(spark, checker, rows)
        _assert_same(spark_outcome, arrow_outcome, full, _ids(checker))
        assert arrow_outcome.fail_batch  # the skipped fail rule
        assert checker._latest[ORDER][2] == 7  # Data Docs show this result  # noqa: SLF001
        assert not checker._latest[ORDER][0].success  # the skipped rule failed  # noqa: SLF001


@pytest.mark.parametrize(
    ("rule", "rows"),
    [
        (_rule("expect_column_mean_to_be_between", column="qty", min_value=0), []),  # GE runs it
        (_rule("expect_column_values_to_match_regex", column="email", regex=r"\bx"), []),
        (_rule("expect_column_values_to_match_regex", column="email", regex=r"(?i)^A"), []),
        (_rule("expect_column_values_to_match_regex", column="email", regex=r"\p{Alpha}+"), []),
        (
            _rule("expect_column_values_to_match_regex", column="email", regex=EMAIL),
            [{"email": "a@b.co\r"}],
        ),
        (
            _rule(
                "expect_column_values_to_not_be_null",
                column="order_id",
                row_condition="qty > 0",
                condition_parser="spark",
            ),
            [],
        ),
        (
            _rule("expect_column_values_to_be_between", column="amount", max_value=1.0),
            [{"amount": math.nan}],
        ),
        (_rule("expect_column_values_to_be_unique", column="amount"), [{"amount": -0.0}]),
        (_rule("expect_column_values_to_be_in_set", column="qty", value_set=[1, "2"]), []),
        (
            _rule(
                "expect_column_values_to_be_between",
                column="_kafka_timestamp",
                min_value=datetime(2000, 1, 1),
            ),
            [],
        ),
    ],
    ids=[
        "ge-run",
        "word-boundary",
        "flags",
        "java-class",
        "line-terminator",
        "row-condition",
        "nan",
        "negative-zero",
        "mixed-set",
        "naive-bound",
    ],
)
@pytest.mark.filterwarnings("ignore:.*(condition_parser|row_condition).*:DeprecationWarning")
def test_validate_arrow_answers_none_when_it_cannot_be_sure(spark, tmp_path_factory, rule, rows):
    checker = _checker(spark, tmp_path_factory, [rule])
    _, _, table = _batch(spark, rows)
    before = dict(checker._latest)  # noqa: SLF001
    answer = checker.validate_arrow(
        table, SCHEMA, message_type=ORDER, table=TABLE, batch_id=1, reference_time=NOW
    )
    assert answer is None
    assert checker._latest == before  # nothing remembered: validate will answer  # noqa: SLF001


def test_validate_arrow_answers_none_for_a_type_it_does_not_model(spark, tmp_path_factory):
    checker = _checker(
        spark,
        tmp_path_factory,
        [_rule("expect_column_values_to_be_in_set", column="qty", value_set=[1])],
    )
    _, _, table = _batch(spark, [{}])
    wrong = table.set_column(
        table.schema.get_field_index("qty"), "qty", table.column("qty").cast(pa.int64())
    )
    where = {"message_type": ORDER, "table": TABLE, "batch_id": 1, "reference_time": NOW}
    assert checker.validate_arrow(wrong, SCHEMA, **where) is None
    assert checker.validate_arrow(table, SCHEMA, **where) is not None


@pytest.mark.parametrize(
    ("pattern", "supported"),
    [
        (EMAIL, True),
        ("^o-[0-9]{1,3}(?:x|y)*$", True),
        (r"a\.b\\c", True),
        (r"[\w.+-]", False),  # "-" at a class's end: left to Spark
        (r"\bword", False),
        (r"a++", False),  # Java's possessive
        (r"[a-z&&[^b]]", False),
        (r"(?<n>x)", False),
        (r"\Qa.b\E", False),
        ("é", False),
    ],
)
def test_regex_subset(pattern, supported):
    assert (python_regex(pattern) is not None) == supported
