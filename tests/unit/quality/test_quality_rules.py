"""parse_rules: every malformed rule is a QualityConfigError naming it, at start-up (no Spark)."""

from __future__ import annotations

import great_expectations as gx
import pytest
from great_expectations.core import ExpectationSuite

from quality.rules import (
    TIMESTAMP_MAX_PARAMETER,
    ExpectationRule,
    QualityConfigError,
    default_rules,
    judged_kwargs,
    missing_columns,
    parse_rules,
    suite_rules,
)

ORDER = "shop.v1.Order"


def rule(**overrides):
    base = {
        "message_type": ORDER,
        "expectation": "expect_column_values_to_not_be_null",
        "kwargs": {"column": "order_id"},
        "policy": "quarantine",
    }
    base.update(overrides)
    return base


def test_valid_rules_parse_in_order_with_their_index():
    rules = parse_rules(
        [
            rule(),
            rule(
                expectation="expect_column_values_to_be_in_set",
                kwargs={"column": "status", "value_set": ["NEW", "PAID"]},
                policy="warn",
            ),
            rule(
                expectation="expect_table_row_count_to_be_between",
                kwargs={"min_value": 1},
                policy="fail",
            ),
        ]
    )
    assert [(r.index, r.expectation, r.policy) for r in rules] == [
        (0, "expect_column_values_to_not_be_null", "quarantine"),
        (1, "expect_column_values_to_be_in_set", "warn"),
        (2, "expect_table_row_count_to_be_between", "fail"),
    ]
    assert rules[1].expectation_id == (
        'expect_column_values_to_be_in_set(column=status, value_set=["NEW", "PAID"])'
    )
    assert rules[0].row_level and not rules[2].row_level


def test_policy_defaults_to_warn():
    raw = rule()
    del raw["policy"]
    assert parse_rules([raw])[0].policy == "warn"


def test_none_and_empty_mean_no_rules():
    assert parse_rules(None) == []
    assert parse_rules([]) == []


@pytest.mark.parametrize(
    ("bad", "expected_fragments"),
    [
        (
            rule(expectation="expect_column_values_to_not_be_nul"),
            [
                "quality.expectations[1]",
                ORDER,
                "expect_column_values_to_not_be_nul",
                "did you mean expect_column_values_to_not_be_null",
            ],
        ),
        (
            rule(kwargs={"colum": "order_id"}),
            ["quality.expectations[1]", "rejected by Great Expectations", "colum"],
        ),
        (
            rule(expectation="expect_column_values_to_be_between", kwargs={"column": "qty"}),
            [
                "quality.expectations[1]",
                "expect_column_values_to_be_between",
                "min_value and max_value cannot both be None",
            ],
        ),
        (
            rule(policy="drop"),
            ["quality.expectations[1]", "policy must be one of warn, quarantine, fail", "'drop'"],
        ),
        (rule(polcy="warn"), ["quality.expectations[1]", "unknown key(s) polcy"]),
        (
            rule(message_type=""),
            ["quality.expectations[1]", "message_type must be a non-empty string"],
        ),
        (rule(kwargs=["order_id"]), ["quality.expectations[1]", "kwargs must be a table"]),
        (
            rule(expectation="expect_table_row_count_to_be_between", kwargs={"min_value": 1}),
            ["quality.expectations[1]", "policy 'quarantine' needs a row-level expectation"],
        ),
        (
            rule(),
            [
                "quality.expectations[1]",
                "same expectation and arguments as quality.expectations[0]",
            ],
        ),
        ("not a table", ["quality.expectations[1]", "must be a table"]),
    ],
)
def test_bad_rule_is_a_config_error_naming_it(bad, expected_fragments):
    with pytest.raises(QualityConfigError) as info:
        parse_rules([rule(), bad])
    message = str(info.value)
    for fragment in expected_fragments:
        assert fragment in message, message


def test_rules_must_be_a_list():
    with pytest.raises(QualityConfigError, match="must be a list of tables"):
        parse_rules("expect_column_values_to_not_be_null")  # type: ignore[arg-type]


def test_defaults_cover_lineage_key_and_timestamp():
    ids = {r.expectation_id: r.policy for r in default_rules(ORDER)}
    for column in (
        "_kafka_topic",
        "_kafka_partition",
        "_kafka_offset",
        "_message_type",
        "_processed_at",
    ):
        assert ids[f"expect_column_values_to_not_be_null(column={column})"] == "fail"
    kafka_key = '["_kafka_topic", "_kafka_partition", "_kafka_offset"]'
    assert ids[f"expect_compound_columns_to_be_unique(column_list={kafka_key})"] == "fail"
    [timestamp] = [r for r in default_rules(ORDER) if r.kwargs.get("column") == "_kafka_timestamp"]
    assert timestamp.policy == "quarantine"
    assert timestamp.kwargs["max_value"] == {"$PARAMETER": "protolake_max_kafka_timestamp"}
    for r in default_rules(ORDER):
        r.to_expectation()  # GE accepts every default


def test_configured_twin_replaces_default_and_other_types_are_excluded():
    configured = parse_rules(
        [
            rule(kwargs={"column": "_processed_at"}, policy="warn"),
            rule(message_type="shop.v1.Refund"),
        ]
    )
    mine = suite_rules(ORDER, configured)
    processed = [r for r in mine if r.kwargs.get("column") == "_processed_at"]
    assert [(r.policy, r.index) for r in processed] == [("warn", 0)]
    assert all(r.message_type == ORDER for r in mine)
    assert len(mine) == len(default_rules(ORDER))


def test_rule_describe_names_index_type_and_expectation():
    r = ExpectationRule(ORDER, "expect_column_values_to_be_unique", {"column": "id"}, "warn", 3)
    assert r.describe() == (
        "quality.expectations[3] (message_type='shop.v1.Order', "
        "expectation='expect_column_values_to_be_unique')"
    )


def test_rules_may_not_judge_the_wall_clock_of_processing():
    # _processed_at differs between two attempts of one batch: only null checks are stable
    with pytest.raises(QualityConfigError, match=r"quality.expectations\[0\].*_processed_at"):
        parse_rules(
            [
                rule(
                    expectation="expect_column_values_to_be_between",
                    kwargs={"column": "_processed_at", "min_value": "2026-01-01"},
                )
            ]
        )
    assert parse_rules([rule(kwargs={"column": "_processed_at"})])[0].policy == "quarantine"


def _regex_rule(regex, expectation="expect_column_values_to_match_regex"):
    key, value = ("regex_list", [regex]) if expectation.endswith("_list") else ("regex", regex)
    return rule(expectation=expectation, kwargs={"column": "email", key: value}, policy="warn")


@pytest.mark.parametrize(
    "expectation",
    [
        "expect_column_values_to_match_regex",
        "expect_column_values_to_not_match_regex",
        "expect_column_values_to_match_regex_list",
        "expect_column_values_to_not_match_regex_list",
    ],
)
def test_an_invalid_regex_is_refused_at_parse_time(expectation):
    with pytest.raises(QualityConfigError) as info:
        parse_rules([_regex_rule("([", expectation)])
    message = str(info.value)
    assert "quality.expectations[0]" in message and "invalid regular expression '(['" in message


@pytest.mark.parametrize(
    "regex",
    [
        r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$",  # both engines
        r"\p{Alpha}+\P{Digit}\pL",  # Java's character classes
        r"(?<user>\w+)@\k<user>",  # Java's named groups and back references
        r"\QA(B\E-\h\z",  # Java's quoting, horizontal space, end of input
        r"a(?i)b(?U:c)",  # Java's flags may stand anywhere, and has U
        r"[a-z&&[^aeiou]]",  # Java's class intersection
        r"\\pX",  # an escaped backslash, then letters
        r"(?<=a)b(?<!c)",  # look-behinds are no named groups
        r"(?<=a|bc)x(?<!ab?)",  # Java's look-behinds may vary within bounds (Python's may not)
        r"(?<=a{1,2})x",
        r"(?<=USD|EU)\d+",  # unbounded outside the look-behind
        r"[*+](?<=a|bc)x(?<=[*]|ab)",  # in a character class, * and + are characters
    ],
)
def test_valid_java_regexes_are_accepted(regex):
    assert parse_rules([_regex_rule(regex)])[0].regexes() == (regex,)


@pytest.mark.parametrize("regex", ["(?<=a+)x", "(?<=a|(b*))x", "(?<=a{2,}|b)x", r"(?<=a|\\+)x"])
def test_a_look_behind_of_unbounded_width_is_left_refused(regex):
    # Java may take some; with no bound the pre-check cannot tell, and a session without a
    # JVM (Spark Connect) checks nothing after it
    with pytest.raises(QualityConfigError, match="fixed-width"):
        parse_rules([_regex_rule(regex)])


@pytest.mark.parametrize("regex", ["*a", "a)", "(?<name", r"\y", "a{2,1}"])
def test_regexes_broken_in_both_engines_are_refused(regex):
    with pytest.raises(QualityConfigError, match="invalid regular expression"):
        parse_rules([_regex_rule(regex)])


def test_missing_columns_names_only_the_rules_whose_columns_the_batch_lacks():
    from pyspark.sql.types import LongType, StructField, StructType

    rules = parse_rules(
        [
            rule(kwargs={"column": "order_id"}),
            rule(kwargs={"column": "sales_channel"}),
            rule(
                expectation="expect_compound_columns_to_be_unique",
                kwargs={"column_list": ["order_id", "region"]},
            ),
        ]
    )
    schema = StructType([StructField("order_id", LongType())])
    missing = missing_columns(rules, schema)
    assert missing == {
        rules[1].expectation_id: ["sales_channel"],
        rules[2].expectation_id: ["region"],
    }


def test_a_rule_naming_a_default_argument_is_the_rule_without_it():
    # GE fills in mostly=1.0: a suite would hold both as one expectation
    with pytest.raises(QualityConfigError, match=r"same expectation and arguments as quality"):
        parse_rules([rule(), rule(kwargs={"column": "order_id", "mostly": 1.0})])
    assert len(parse_rules([rule(), rule(kwargs={"column": "order_id", "mostly": 0.5})])) == 2


def test_a_configured_rule_equal_to_a_default_once_ge_fills_its_defaults_replaces_it(ge_context):
    kafka_key = ["_kafka_topic", "_kafka_partition", "_kafka_offset"]
    configured = parse_rules(
        [
            rule(
                expectation="expect_compound_columns_to_be_unique",
                kwargs={"column_list": kafka_key, "ignore_row_if": "all_values_are_missing"},
                policy="warn",
            )
        ]
    )
    mine = suite_rules(ORDER, configured)
    unique = [r for r in mine if r.expectation == "expect_compound_columns_to_be_unique"]
    assert [(r.policy, r.index) for r in unique] == [("warn", 0)]
    assert len(mine) == len(default_rules(ORDER))
    # one GE expectation per rule: GE's own suite keeps every one of them
    assert len(_ge_suite(mine).expectations) == len(mine)


@pytest.fixture
def ge_context():
    """GE's suites add expectations only with a data context (an ephemeral one here)."""
    return gx.get_context(mode="ephemeral")


def _ge_suite(rules: list[ExpectationRule]) -> ExpectationSuite:
    suite = ExpectationSuite(name="t")
    for r in rules:
        suite.add_expectation(r.to_expectation())
    return suite


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"column": "order_id"}, {"column": "order_id", "mostly": 1.0}),
        ({"column": "order_id"}, {"column": "order_id", "meta": {"owner": "sales"}}),
        ({"column": "order_id"}, {"column": "order_id", "mostly": 0.5}),
        ({"column": "order_id"}, {"column": "customer_id"}),
    ],
    ids=["default-named", "meta-only", "other-mostly", "other-column"],
)
def test_twins_are_what_ge_s_suite_holds_as_one_expectation(ge_context, first, second):
    expectation = "expect_column_values_to_not_be_null"
    one, other = (ExpectationRule(ORDER, expectation, kwargs) for kwargs in (first, second))
    assert one.is_twin(other) == (len(_ge_suite([one, other]).expectations) == 1)


@pytest.mark.parametrize(
    ("expectation", "kwargs"),
    [
        ("expect_column_values_to_be_between", {"column": "qty", "min_value": 10, "max_value": 5}),
        (
            "expect_column_value_lengths_to_be_between",
            {"column": "order_id", "min_value": 3, "max_value": 2},
        ),
        (
            "expect_column_values_to_be_between",
            {"column": "day", "min_value": "2025-01-01", "max_value": "2024-01-01"},
        ),
    ],
)
def test_a_min_above_the_max_is_refused(expectation, kwargs):
    """No value is within: every row would be unexpected (GE refuses it only when it runs)."""
    with pytest.raises(QualityConfigError, match="is greater than max_value") as info:
        parse_rules([rule(expectation=expectation, kwargs=kwargs, policy="warn")])
    assert "quality.expectations[0]" in str(info.value)


def test_bounds_given_as_a_parameter_are_left_to_validation():
    bound = {"$PARAMETER": TIMESTAMP_MAX_PARAMETER}
    kwargs = {"column": "qty", "min_value": 5, "max_value": bound}
    (parsed,) = parse_rules([rule(expectation="expect_column_values_to_be_between", kwargs=kwargs)])
    assert parsed.kwargs["max_value"] == bound


def test_a_parameter_no_validation_sets_is_refused():
    kwargs = {"column": "qty", "min_value": {"$PARAMETER": "min_qty"}, "max_value": 5}
    with pytest.raises(QualityConfigError) as info:
        parse_rules([rule(expectation="expect_column_values_to_be_between", kwargs=kwargs)])
    message = str(info.value)
    assert "quality.expectations[0]" in message and "'min_qty'" in message
    assert TIMESTAMP_MAX_PARAMETER in message
    nested = {"column": "status", "value_set": ["PAID", {"$PARAMETER": "other"}]}
    with pytest.raises(QualityConfigError, match="'other'"):
        parse_rules([rule(expectation="expect_column_values_to_be_in_set", kwargs=nested)])


@pytest.mark.parametrize(
    ("expectation", "given", "judged"),
    [
        # GE's model makes be_between's bounds floats and value_lengths' bounds integers
        ("expect_column_values_to_be_between", 2**53 + 1, float(2**53)),
        ("expect_column_value_lengths_to_be_between", 1.5, 1),
    ],
)
def test_numbers_are_compared_as_great_expectations_judges_them(expectation, given, judged):
    kwargs = {"column": "qty", "min_value": given}
    (parsed,) = parse_rules([rule(expectation=expectation, kwargs=kwargs, policy="warn")])
    assert judged_kwargs(parsed)["min_value"] == judged
    assert type(judged_kwargs(parsed)["min_value"]) is type(judged)
    assert parsed.to_expectation().configuration.kwargs["min_value"] == judged
    # the rule keeps them as written: its id (the results' key) does not change
    assert parsed.kwargs["min_value"] == given
    assert f"min_value={given}" in parsed.expectation_id


def test_a_rule_on_a_nested_field_is_refused():
    with pytest.raises(QualityConfigError, match="top-level columns") as info:
        parse_rules([rule(kwargs={"column": "customer.email"})])
    assert "customer.email" in str(info.value)
