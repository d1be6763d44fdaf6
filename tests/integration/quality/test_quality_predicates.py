"""Row predicates agree with Great Expectations: the same rows, for every modelled expectation.

For each case GE itself (result format COMPLETE, rows keyed by the Kafka coordinates) names the
unexpected rows; ``unexpected_predicate`` must flag exactly those rows of the same batch.
"""

from __future__ import annotations

from datetime import UTC, datetime

import great_expectations as gx
import pytest

from quality.predicates import MODELLED_EXPECTATIONS, unexpected_predicate
from quality.rules import KAFKA_KEY, ExpectationRule
from tests.support.quality_testkit import NOW, make_batch, order_row

pytestmark = pytest.mark.integration

CASES = [
    ("expect_column_values_to_not_be_null", {"column": "order_id"}),
    ("expect_column_values_to_be_null", {"column": "email"}),
    ("expect_column_values_to_be_in_set", {"column": "status", "value_set": ["NEW", "PAID"]}),
    ("expect_column_values_to_not_be_in_set", {"column": "status", "value_set": ["LOST"]}),
    ("expect_column_values_to_be_between", {"column": "qty", "min_value": 1, "max_value": 5}),
    (
        "expect_column_values_to_be_between",
        {"column": "qty", "min_value": 0, "max_value": 5, "strict_min": True, "strict_max": True},
    ),
    ("expect_column_values_to_be_between", {"column": "qty", "max_value": 4}),
    ("expect_column_values_to_be_between", {"column": "amount", "min_value": 10.5}),
    (
        "expect_column_values_to_be_between",
        {
            "column": "_kafka_timestamp",
            "min_value": datetime(2000, 1, 1, tzinfo=UTC),
            "max_value": NOW,
        },
    ),
    (
        "expect_column_value_lengths_to_be_between",
        {"column": "order_id", "min_value": 3, "max_value": 3},
    ),
    ("expect_column_value_lengths_to_equal", {"column": "order_id", "value": 3}),
    ("expect_column_values_to_match_regex", {"column": "email", "regex": "^[^@]+@[^@]+$"}),
    ("expect_column_values_to_not_match_regex", {"column": "email", "regex": "bad"}),
    ("expect_column_values_to_be_unique", {"column": "order_id"}),
    ("expect_compound_columns_to_be_unique", {"column_list": ["order_id", "status"]}),
    (
        "expect_compound_columns_to_be_unique",
        {"column_list": ["order_id", "status"], "ignore_row_if": "any_value_is_missing"},
    ),
    (
        "expect_compound_columns_to_be_unique",
        {"column_list": ["email", "status"], "ignore_row_if": "never"},
    ),
]


@pytest.fixture(scope="module")
def batch(spark):
    rows = [order_row(i) for i in range(12)]
    rows[0] = order_row(0, qty=0, _kafka_timestamp=datetime(1999, 12, 31, tzinfo=UTC))
    rows[1] = order_row(1, order_id=None, status=None, email=None)
    rows[2] = order_row(2, status=None, order_id=None, email=None)
    rows[3] = order_row(3, order_id="o-3", email=None)
    rows[4] = order_row(4, order_id="o-3", email="bad")
    rows[5] = order_row(5, status="LOST", order_id="o-55", email="a@b@c")
    rows[6] = order_row(6, qty=5, order_id="o-5")
    rows[7] = order_row(7, qty=None, amount=None)
    rows[8] = order_row(8, qty=10, _kafka_timestamp=NOW.replace(year=NOW.year + 2))
    rows[9] = order_row(9, email=None, status="PAID", order_id="o-9")
    rows[10] = order_row(10, email=None, status="PAID", order_id="o-9")
    rows[11] = order_row(11, amount=10.5, order_id=None, status="NEW")
    return make_batch(spark, rows).cache()


@pytest.fixture(scope="module")
def ge_batch(batch):
    context = gx.get_context(mode="ephemeral")
    asset = context.data_sources.add_spark("parity").add_dataframe_asset("orders")
    return asset.add_batch_definition_whole_dataframe("all").get_batch(
        batch_parameters={"dataframe": batch}
    )


def test_every_modelled_expectation_has_a_case():
    assert {name for name, _ in CASES} == MODELLED_EXPECTATIONS


@pytest.mark.parametrize(
    ("expectation", "kwargs"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)]
)
def test_predicate_flags_the_rows_ge_finds_unexpected(batch, ge_batch, expectation, kwargs):
    rule = ExpectationRule("shop.v1.Order", expectation, kwargs, "quarantine", 0)
    verdict = ge_batch.validate(
        rule.to_expectation(),
        result_format={
            "result_format": "COMPLETE",
            "unexpected_index_column_names": list(KAFKA_KEY),
        },
    )
    assert not verdict.exception_info.get("raised_exception"), verdict.exception_info
    expected = {
        tuple(item[k] for k in KAFKA_KEY) for item in verdict.result["unexpected_index_list"]
    }
    # withColumn, not where: the uniqueness predicates are window functions.
    marked = batch.withColumn("unexpected", unexpected_predicate(rule)).where("unexpected")
    flagged = {tuple(r) for r in marked.select(*KAFKA_KEY).collect()}
    assert flagged == expected
    assert len(flagged) == verdict.result["unexpected_count"]


def test_suite_parameters_are_resolved():
    rule = ExpectationRule(
        "t",
        "expect_column_values_to_be_between",
        {"column": "x", "max_value": {"$PARAMETER": "p"}},
        "quarantine",
    )
    assert "2030" in str(unexpected_predicate(rule, {"p": datetime(2030, 1, 1)}))


def test_row_condition_is_left_to_great_expectations():
    rule = ExpectationRule(
        "t",
        "expect_column_values_to_not_be_null",
        {"column": "x", "row_condition": 'col("y")>0'},
        "quarantine",
    )
    assert unexpected_predicate(rule) is None
