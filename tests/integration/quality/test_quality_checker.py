"""QualityChecker on real Spark: policies, row-level quarantine, defaults, results table."""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql import functions as F  # noqa: N812
from pyspark.testing import assertDataFrameEqual

from quality.checker import QualityChecker, QualityFailed
from quality.results import summarize
from quality.rules import QualityConfigError, parse_rules
from tests.support.quality_testkit import NOW, ORDER, TABLE, keys, make_batch, order_row

pytestmark = pytest.mark.integration

KEY = ("shop.orders",)


def checker_for(spark, tmp_path, *raw_rules):
    return QualityChecker(spark, str(tmp_path / "lakehouse"), parse_rules(list(raw_rules)))


def not_null(column, policy, message_type=ORDER):
    return {
        "message_type": message_type,
        "expectation": "expect_column_values_to_not_be_null",
        "kwargs": {"column": column},
        "policy": policy,
    }


def in_set(column, values, policy):
    return {
        "message_type": ORDER,
        "expectation": "expect_column_values_to_be_in_set",
        "kwargs": {"column": column, "value_set": values},
        "policy": policy,
    }


def result_of(outcome, expectation_id):
    [found] = [r for r in outcome.results if r.expectation == expectation_id]
    return found


def assert_partition(batch, outcome):
    """passed + failed == input, no row in both (compared on all input columns)."""
    failed_rows = outcome.failed.select(*batch.columns)
    assertDataFrameEqual(outcome.passed.unionByName(failed_rows), batch)
    assert not keys(outcome.passed) & keys(outcome.failed)


def test_clean_batch_passes_everything(spark, tmp_path):
    checker = checker_for(spark, tmp_path, not_null("order_id", "quarantine"))
    batch = make_batch(spark, [order_row(i) for i in range(6)])
    outcome = checker.validate(batch, message_type=ORDER, table=TABLE, batch_id=0)
    assert not outcome.fail_batch
    assert outcome.failed.count() == 0
    assert outcome.failed.columns == [*batch.columns, "reason_code", "stage", "reason"]
    assert_partition(batch, outcome)
    assert all(r.success for r in outcome.results)
    assert {r.element_count for r in outcome.results if r.element_count is not None} == {6}
    assert outcome.rows_checked == 6 and outcome.rows_quarantined == 0


def test_warn_counts_and_keeps_every_row(spark, tmp_path):
    checker = checker_for(spark, tmp_path, not_null("order_id", "warn"))
    rows = [order_row(i, order_id=None if i in (1, 4) else f"o-{i}") for i in range(6)]
    batch = make_batch(spark, rows)
    outcome = checker.validate(batch, message_type=ORDER, table=TABLE, batch_id=3)
    verdict = result_of(outcome, "expect_column_values_to_not_be_null(column=order_id)")
    assert (verdict.success, verdict.unexpected_count, verdict.element_count) == (False, 2, 6)
    assert verdict.policy == "warn" and verdict.batch_id == 3 and verdict.table == TABLE
    assert not outcome.fail_batch
    assert outcome.passed.count() == 6 and outcome.failed.count() == 0


def test_quarantine_moves_exactly_the_failing_rows_with_reasons(spark, tmp_path):
    checker = checker_for(
        spark,
        tmp_path,
        not_null("order_id", "quarantine"),
        in_set("status", ["NEW", "PAID", "SHIPPED"], "quarantine"),
        in_set("qty", [1, 2, 3, 4, 5], "warn"),
    )
    rows = [order_row(i) for i in range(10)]
    rows[2] = order_row(2, order_id=None)
    rows[5] = order_row(5, status="LOST")
    rows[7] = order_row(7, order_id=None, status="??")
    rows[8] = order_row(8, qty=99)  # warn only: stays
    batch = make_batch(spark, rows)
    outcome = checker.validate(batch, message_type=ORDER, table=TABLE, batch_id=1)

    assert not outcome.fail_batch
    assert keys(outcome.failed) == {
        ("shop.orders", 0, 2),
        ("shop.orders", 1, 5),
        ("shop.orders", 1, 7),
    }
    assert_partition(batch, outcome)
    assert outcome.rows_quarantined == 3
    reasons = {r["_kafka_offset"]: r for r in outcome.failed.collect()}
    null_reason = (
        "expect_column_values_to_not_be_null(column=order_id) failed: 2 of 10 rows unexpected"
    )
    set_reason = (
        'expect_column_values_to_be_in_set(column=status, value_set=["NEW", "PAID", "SHIPPED"]) '
        "failed: 2 of 10 rows unexpected"
    )
    assert reasons[2]["reason"] == null_reason
    assert reasons[5]["reason"] == set_reason
    assert reasons[7]["reason"] == f"{null_reason}; {set_reason}"
    assert {(r["reason_code"], r["stage"]) for r in reasons.values()} == {("DQ_FAILED", "quality")}
    assert reasons[5]["status"] == "LOST"  # the row's own data travels with it
    warned = result_of(
        outcome, "expect_column_values_to_be_in_set(column=qty, value_set=[1, 2, 3, 4, 5])"
    )
    assert (warned.success, warned.unexpected_count) == (False, 1)
    assert warned.observed_value == "unexpected e.g. [99]"  # the sample, for failures only


def test_quarantine_rule_that_passes_thanks_to_mostly_moves_nothing(spark, tmp_path):
    rule = not_null("order_id", "quarantine")
    rule["kwargs"]["mostly"] = 0.5
    checker = checker_for(spark, tmp_path, rule)
    rows = [order_row(i, order_id=None if i == 0 else "x") for i in range(4)]
    outcome = checker.validate(make_batch(spark, rows), message_type=ORDER, table=TABLE, batch_id=0)
    verdict = outcome.results[-1]
    assert verdict.expectation.startswith("expect_column_values_to_not_be_null(column=order_id")
    assert (verdict.success, verdict.unexpected_count) == (True, 1)
    assert outcome.failed.count() == 0 and outcome.passed.count() == 4


def test_fail_policy_fails_the_batch(spark, tmp_path):
    checker = checker_for(
        spark,
        tmp_path,
        not_null("email", "fail"),
        {
            "message_type": ORDER,
            "expectation": "expect_table_row_count_to_be_between",
            "kwargs": {"min_value": 1, "max_value": 100},
            "policy": "fail",
        },
    )
    rows = [order_row(i, email=None if i == 3 else "a@b") for i in range(5)]
    outcome = checker.validate(make_batch(spark, rows), message_type=ORDER, table=TABLE, batch_id=9)
    assert outcome.fail_batch
    error = QualityFailed(outcome)
    assert "expect_column_values_to_not_be_null(column=email)" in str(error)
    assert "expect_table_row_count_to_be_between" not in str(error)  # that one passed
    row_count = result_of(
        outcome, "expect_table_row_count_to_be_between(max_value=100, min_value=1)"
    )
    assert row_count.success and row_count.observed_value == "5"
    assert outcome.failed.count() == 0  # fail never quarantines: the caller commits nothing


def test_defaults_fail_on_duplicate_coordinates_and_null_lineage(spark, tmp_path):
    checker = checker_for(spark, tmp_path)  # no configured rules: defaults only
    rows = [order_row(i) for i in range(4)] + [order_row(2)]
    outcome = checker.validate(make_batch(spark, rows), message_type=ORDER, table=TABLE, batch_id=0)
    assert outcome.fail_batch
    unique = [
        r for r in outcome.results if r.expectation_type == "expect_compound_columns_to_be_unique"
    ]
    assert [(r.success, r.unexpected_count, r.policy) for r in unique] == [(False, 2, "fail")]
    duplicate = '{"_kafka_offset": 2, "_kafka_partition": 0, "_kafka_topic": "shop.orders"}'
    assert unique[0].observed_value == f"unexpected e.g. [{duplicate}, {duplicate}]"

    rows = [order_row(i) for i in range(3)] + [order_row(3, _processed_at=None)]
    outcome = checker.validate(make_batch(spark, rows), message_type=ORDER, table=TABLE, batch_id=1)
    assert outcome.fail_batch
    failed = [r.expectation for r in outcome.results if not r.success]
    assert failed == ["expect_column_values_to_not_be_null(column=_processed_at)"]


def test_a_configured_default_naming_its_default_arguments_replaces_the_default(spark, tmp_path):
    # GE's suite holds it and the default as one expectation: the configured one takes over
    kafka_key = ["_kafka_topic", "_kafka_partition", "_kafka_offset"]
    unique_warn = {
        "message_type": ORDER,
        "expectation": "expect_compound_columns_to_be_unique",
        "kwargs": {"column_list": kafka_key, "ignore_row_if": "all_values_are_missing"},
        "policy": "warn",
    }
    checker = checker_for(spark, tmp_path, unique_warn)
    rows = [order_row(i) for i in range(4)] + [order_row(2)]
    outcome = checker.validate(make_batch(spark, rows), message_type=ORDER, table=TABLE, batch_id=0)
    assert not outcome.fail_batch
    unique = [
        r for r in outcome.results if r.expectation_type == "expect_compound_columns_to_be_unique"
    ]
    assert [(r.success, r.unexpected_count, r.policy) for r in unique] == [(False, 2, "warn")]


def test_default_timestamp_bounds_quarantine_insane_kafka_timestamps(spark, tmp_path):
    checker = checker_for(spark, tmp_path)
    rows = [order_row(i) for i in range(5)]
    rows[1] = order_row(1, _kafka_timestamp=datetime(1970, 1, 1))
    rows[3] = order_row(3, _kafka_timestamp=NOW.replace(year=NOW.year + 1))
    batch = make_batch(spark, rows)
    outcome = checker.validate(batch, message_type=ORDER, table=TABLE, batch_id=0)
    assert not outcome.fail_batch
    assert keys(outcome.failed) == {("shop.orders", 1, 1), ("shop.orders", 1, 3)}
    assert_partition(batch, outcome)
    [reason] = {r["reason"] for r in outcome.failed.collect()}
    assert reason.startswith("expect_column_values_to_be_between(column=_kafka_timestamp")


def test_unmodelled_row_expectation_quarantines_through_ge_row_list(spark, tmp_path):
    checker = checker_for(
        spark,
        tmp_path,
        {
            "message_type": ORDER,
            "expectation": "expect_column_pair_values_a_to_be_greater_than_b",
            "kwargs": {"column_A": "amount", "column_B": "qty"},
            "policy": "quarantine",
        },
    )
    rows = [order_row(i) for i in range(6)]
    rows[4] = order_row(4, amount=0.5)
    batch = make_batch(spark, rows)
    outcome = checker.validate(batch, message_type=ORDER, table=TABLE, batch_id=0)
    assert keys(outcome.failed) == {("shop.orders", 0, 4)}
    assert_partition(batch, outcome)
    assert outcome.failed.first()["reason"].startswith(
        "expect_column_pair_values_a_to_be_greater_than_b(column_A=amount, column_B=qty)"
        " failed: 1 of 6"
    )


def test_a_rule_on_a_missing_column_is_skipped_and_reported(spark, tmp_path, caplog):
    # e.g. a field a later schema version adds, while the table has only seen earlier ones
    checker = checker_for(
        spark,
        tmp_path,
        not_null("order_id", "quarantine"),
        not_null("coupon", "quarantine"),
        in_set("channel", ["web"], "warn"),
    )
    rows = [order_row(i, order_id=None if i == 1 else f"o-{i}") for i in range(4)]
    batch = make_batch(spark, rows)
    with caplog.at_level("WARNING", logger="quality"):
        outcome = checker.validate(batch, message_type=ORDER, table=TABLE, batch_id=0)
    assert not outcome.fail_batch
    assert keys(outcome.failed) == {("shop.orders", 1, 1)}  # the rules that could run did
    assert_partition(batch, outcome)
    skipped = result_of(outcome, "expect_column_values_to_not_be_null(column=coupon)")
    assert (skipped.success, skipped.policy, skipped.unexpected_count) == (
        False,
        "quarantine",
        None,
    )
    assert skipped.observed_value == "skipped: column(s) coupon not in the batch"
    assert result_of(
        outcome, 'expect_column_values_to_be_in_set(column=channel, value_set=["web"])'
    )
    assert [r.expectation for r in outcome.results] == [
        r.expectation_id for r in checker.rules_for(ORDER)
    ]
    assert "quality.expectations[1]" in caplog.text and "coupon not in the batch" in caplog.text
    # Data Docs show the skipped rule as the results table does: unsuccessful, and why
    suite, *_ = checker._latest[ORDER]  # noqa: SLF001
    assert not suite.success
    assert [r.expectation_config.type for r in suite.results] == [
        r.expectation for r in checker.rules_for(ORDER)
    ]
    (docs_skipped,) = [
        r for r in suite.results if r.expectation_config.kwargs.get("column") == "coupon"
    ]
    assert not docs_skipped.success
    assert docs_skipped.result["observed_value"] == "skipped: column(s) coupon not in the batch"
    index = checker.build_data_docs()
    pages = [p.read_text() for p in index.parent.rglob("*.html") if "validations" in p.parts]
    assert any("skipped: column(s) coupon not in the batch" in page for page in pages)
    assert "data docs rendering" not in caplog.text  # GE logs a page it could not render
    checker.write_results(outcome.results, 0)
    (summary,) = summarize(spark, str(tmp_path / "lakehouse"))
    assert summary["failed_by_expectation"][
        "expect_column_values_to_not_be_null(column=coupon)"
    ] == {"policy": "quarantine", "failed_batches": 1, "unexpected_rows": 0}


def test_a_fail_rule_on_a_missing_column_fails_the_batch(spark, tmp_path):
    checker = checker_for(spark, tmp_path, not_null("coupon", "fail"))
    outcome = checker.validate(
        make_batch(spark, [order_row(0)]), message_type=ORDER, table=TABLE, batch_id=0
    )
    assert outcome.fail_batch
    assert "expect_column_values_to_not_be_null(column=coupon)" in str(QualityFailed(outcome))


def test_a_regex_java_rejects_is_refused_when_the_checker_starts(spark, tmp_path):
    rule = {
        "message_type": ORDER,
        "expectation": "expect_column_values_to_match_regex",
        "kwargs": {"column": "email", "regex": "x{"},  # Python: a literal brace; Java: an error
        "policy": "warn",
    }
    parse_rules([rule])  # passes Python's pre-check
    with pytest.raises(QualityConfigError, match=r"quality.expectations\[0\].*java.util.regex"):
        checker_for(spark, tmp_path, rule)


def quarantined_by_email_regex(spark, tmp_path, expectation, regex):
    """The rows a quarantine rule on ``email`` fails, of three plain emails and a.b@..."""
    rule = {
        "message_type": ORDER,
        "expectation": expectation,
        "kwargs": {"column": "email", "regex": regex},
        "policy": "quarantine",
    }
    checker = checker_for(spark, tmp_path, rule)
    rows = [order_row(i) for i in range(3)] + [order_row(3, email="a.b@example.com")]
    outcome = checker.validate(make_batch(spark, rows), message_type=ORDER, table=TABLE, batch_id=0)
    return keys(outcome.failed)


def test_regexes_in_java_syntax_run_in_spark(spark, tmp_path):
    regex = r"^(?<user>\p{Alnum}+)@\Qexample.com\E\z"
    failed = quarantined_by_email_regex(
        spark, tmp_path, "expect_column_values_to_match_regex", regex
    )
    assert failed == {("shop.orders", 1, 3)}


def test_a_look_behind_of_bounded_width_runs_in_spark(spark, tmp_path):
    # Java takes a look-behind whose width varies within bounds; Python's re does not
    failed = quarantined_by_email_regex(
        spark, tmp_path, "expect_column_values_to_not_match_regex", r"(?<=a|\.b)@"
    )
    assert failed == {("shop.orders", 1, 3)}


def test_error_inside_great_expectations_is_a_config_error(spark, tmp_path):
    rule = {
        "message_type": ORDER,
        "expectation": "expect_column_values_to_be_between",
        "kwargs": {"column": "order_id", "min_value": 1, "max_value": 9},
        "policy": "warn",
    }
    checker = checker_for(spark, tmp_path, rule)
    with pytest.raises(
        QualityConfigError, match=r"quality.expectations\[0\].*Great Expectations raised"
    ):
        checker.validate(
            make_batch(spark, [order_row(0)]), message_type=ORDER, table=TABLE, batch_id=0
        )


def test_a_value_set_spark_cannot_compare_with_the_column_names_its_rule(spark, tmp_path):
    # 'PAID' and 1 against a string column: Spark casts the column to a number (ANSI mode
    # fails on 'PAID'); the rule runs through GE, whose error names it, and the table's
    # other rules are not taken down with it
    mixed = in_set("status", ["PAID", 1], "warn")
    checker = checker_for(spark, tmp_path, not_null("order_id", "warn"), mixed)
    with pytest.raises(
        QualityConfigError, match=r"quality.expectations\[1\].*expect_column_values_to_be_in_set"
    ):
        checker.validate(
            make_batch(spark, [order_row(0)]), message_type=ORDER, table=TABLE, batch_id=0
        )
    # strings against a string column, numbers against a numeric one: judged as before
    plain = checker_for(
        spark, tmp_path, in_set("status", ["NEW"], "warn"), in_set("qty", [1, 2.5], "warn")
    )
    rows = [order_row(0), order_row(1, status="NEW"), order_row(3)]  # qty 1, 2, 4
    outcome = plain.validate(make_batch(spark, rows), message_type=ORDER, table=TABLE, batch_id=0)
    verdicts = {
        r.expectation: (r.success, r.unexpected_count)
        for r in outcome.results
        if r.expectation.startswith("expect_column_values_to_be_in_set")
    }
    assert sorted(verdicts.values()) == [(False, 2), (False, 2)], verdicts


def test_suites_per_message_type_and_lazy_defaults(spark, tmp_path):
    checker = checker_for(
        spark, tmp_path, not_null("order_id", "warn"), not_null("id", "warn", "shop.v1.Refund")
    )
    assert checker.suite_names() == ["shop.v1.Order", "shop.v1.Refund"]
    batch = make_batch(spark, [order_row(0)]).withColumn("_message_type", F.lit("shop.v1.Audit"))
    outcome = checker.validate(
        batch, message_type="shop.v1.Audit", table="shop_v1__audit", batch_id=0
    )
    assert all(r.success for r in outcome.results) and len(outcome.results) == 7
    assert checker.suite_names() == ["shop.v1.Audit", "shop.v1.Order", "shop.v1.Refund"]


def test_results_written_idempotently_per_batch_and_table(spark, tmp_path):
    checker = checker_for(spark, tmp_path, not_null("order_id", "quarantine"))
    lakehouse = str(tmp_path / "lakehouse")
    bad = make_batch(spark, [order_row(i, order_id=None if i == 0 else "x") for i in range(4)])
    good = make_batch(spark, [order_row(i) for i in range(10, 13)])
    first = checker.validate(bad, message_type=ORDER, table=TABLE, batch_id=7)
    assert checker.write_results(first.results, 7) == 8
    assert checker.write_results(first.results, 7) == 8  # a retried micro-batch

    table = spark.read.format("delta").load(checker.results_path)
    assert table.count() == 8
    assert table.groupBy("batch_id", "table", "expectation").count().where("count > 1").count() == 0
    row = table.where(
        "expectation = 'expect_column_values_to_not_be_null(column=order_id)'"
    ).first()
    assert row.asDict() | {"validated_at": None, "observed_value": None} == {
        "batch_id": 7,
        "table": TABLE,
        "message_type": ORDER,
        "expectation": "expect_column_values_to_not_be_null(column=order_id)",
        "expectation_type": "expect_column_values_to_not_be_null",
        "policy": "quarantine",
        "success": False,
        "element_count": 4,
        "unexpected_count": 1,
        "observed_value": None,
        "validated_at": None,
        "rows_checked": 4,
        "rows_quarantined": 1,
        "source": "",
    }

    # The retry saw different data (e.g. a fixed upstream): its verdict replaces the old one.
    retry = checker.validate(good, message_type=ORDER, table=TABLE, batch_id=7)
    checker.write_results(retry.results, 7)
    other = checker.validate(good, message_type=ORDER, table="shop_v1__order_copy", batch_id=7)
    checker.write_results(other.results, 7)
    table = spark.read.format("delta").load(checker.results_path)
    assert table.count() == 16
    assert table.where("table = 'shop_v1__order' AND NOT success").count() == 0

    checker.write_results(first.results, 7)
    checker.validate(good, message_type=ORDER, table=TABLE, batch_id=8)
    checker.write_results(
        checker.validate(good, message_type=ORDER, table=TABLE, batch_id=8).results, 8
    )
    summary = {s["table"]: s for s in summarize(spark, lakehouse)}
    assert summary[TABLE] == {
        "table": TABLE,
        "message_type": ORDER,
        "batches": 2,
        "checked": 7,
        "passed": 6,
        "quarantined": 1,
        "failed_batches": 0,
        "failed_by_expectation": {
            "expect_column_values_to_not_be_null(column=order_id)": {
                "policy": "quarantine",
                "failed_batches": 1,
                "unexpected_rows": 1,
            }
        },
    }
    assert summary["shop_v1__order_copy"]["checked"] == 3


def test_write_results_rejects_other_batch_ids(spark, tmp_path):
    checker = checker_for(spark, tmp_path)
    outcome = checker.validate(
        make_batch(spark, [order_row(0)]), message_type=ORDER, table=TABLE, batch_id=1
    )
    with pytest.raises(ValueError, match="batch ids \\[1\\]"):
        checker.write_results(outcome.results, 2)


def test_summarize_is_empty_before_any_result(spark, tmp_path):
    assert summarize(spark, str(tmp_path / "nothing")) == []


def test_concurrent_validations_of_different_tables_keep_their_own_rows(spark, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    checker = checker_for(spark, tmp_path, not_null("order_id", "quarantine"))
    small = make_batch(spark, [order_row(i, order_id=None if i == 0 else "x") for i in range(3)])
    large = make_batch(
        spark, [order_row(i, order_id=None if i % 4 == 0 else "x") for i in range(20)]
    )

    def run(args):
        batch, table = args
        outcome = checker.validate(batch, message_type=ORDER, table=table, batch_id=0)
        return outcome.rows_checked, outcome.rows_quarantined, outcome.failed.count()

    with ThreadPoolExecutor(max_workers=2) as pool:
        got = list(pool.map(run, [(small, "t_small"), (large, "t_large")]))
    assert got == [(3, 1, 1), (20, 5, 5)]


def test_streams_sharing_a_batch_id_keep_their_own_results(spark, tmp_path):
    # Silver runs one stream per bronze table; each counts batches from 0.
    checker = checker_for(spark, tmp_path, not_null("order_id", "quarantine"))
    bad = make_batch(spark, [order_row(i, order_id=None if i == 0 else "x") for i in range(4)])
    empty = make_batch(spark, [])
    from_orders = checker.validate(bad, message_type=ORDER, table=TABLE, batch_id=0)
    from_lines = checker.validate(empty, message_type=ORDER, table=TABLE, batch_id=0)
    checker.write_results(from_orders.results, 0, source="stream-orders")
    checker.write_results(from_lines.results, 0, source="stream-lines")
    checker.write_results(from_lines.results, 0, source="stream-lines")  # a retry

    table = spark.read.format("delta").load(checker.results_path)
    per_source = {r["source"]: r["count"] for r in table.groupBy("source").count().collect()}
    assert per_source == {"stream-orders": 8, "stream-lines": 8}
    failed = table.where("source = 'stream-orders' AND NOT success").count()
    assert failed == 1


def test_summarize_keeps_each_streams_batch_apart(spark, tmp_path):
    # Several silver streams (one per bronze table) validate one silver table under the same
    # batch ids; a stream whose batch held none of its rows writes an empty verdict.
    checker = checker_for(spark, tmp_path, not_null("order_id", "quarantine"))
    five = make_batch(spark, [order_row(i, order_id=None if i == 0 else "x") for i in range(5)])
    three = make_batch(spark, [order_row(i, order_id="y") for i in range(3)])
    empty = three.limit(0)
    for source, batch in (("s-a", empty), ("s-b", five), ("s-c", three), ("s-d", empty)):
        outcome = checker.validate(batch, message_type=ORDER, table=TABLE, batch_id=0)
        checker.write_results(outcome.results, 0, source)
    (summary,) = summarize(spark, str(tmp_path / "lakehouse"))
    assert (summary["batches"], summary["checked"], summary["passed"]) == (2, 8, 7)
    assert summary["quarantined"] == 1
