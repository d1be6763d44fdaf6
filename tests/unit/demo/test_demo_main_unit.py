"""The demo (pipelines/demo) without a stack: configuration overrides, the embedded demo.toml, the
expected counts, the checks and the printed report, and the command line."""

from __future__ import annotations

import json
import tomllib

import pytest

from pipelines.cli import build_parser
from pipelines.demo.config import DEMO_CONFIG, load_demo_config
from pipelines.demo.expected import expected_counts
from pipelines.demo.main import run_from_args
from pipelines.demo.report import DemoReport, evaluate_checks, format_report
from pipelines.demo.stream import (
    DQ_EMAIL,
    DQ_QUANTITY,
    EMAIL_PATTERN,
    QUANTITY_RANGE,
    DemoStreamSummary,
    demo_topics,
)
from pipelines.settings import ConfigError


def test_embedded_config_loads_with_the_demo_topics():
    cfg = load_demo_config(env={})
    assert cfg.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert cfg.registry.url == "http://127.0.0.1:8081"
    assert list(cfg.kafka.topics) == [
        "demo.orders",
        "demo.order_lines",
        "demo.customers",
        "demo.inventory",
    ]
    assert cfg.lakehouse.path == "./run/lakehouse"


def test_environment_lakehouse_and_prefix_override_the_file(tmp_path):
    cfg = load_demo_config(
        lakehouse=str(tmp_path / "lh"),
        topic_prefix="t42.",
        env={
            "PROTOLAKE_KAFKA_BOOTSTRAP": "127.0.0.1:19092",
            "PROTOLAKE_REGISTRY_URL": "http://127.0.0.1:18081",
        },
    )
    assert cfg.kafka.bootstrap_servers == "127.0.0.1:19092"
    assert cfg.registry.url == "http://127.0.0.1:18081"
    assert cfg.lakehouse_path == str(tmp_path / "lh")
    assert (
        list(cfg.kafka.topics)
        == demo_topics("t42.")
        == [
            "t42.orders",
            "t42.order_lines",
            "t42.customers",
            "t42.inventory",
        ]
    )


def test_a_custom_config_replaces_topics_and_pattern(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        '[kafka]\nbootstrap_servers = "h:1"\ntopic_pattern = "x.*"\n[lakehouse]\npath = "/tmp/x"\n'
    )
    cfg = load_demo_config(path, env={})
    assert cfg.kafka.topic_pattern == "" and cfg.kafka.topics[0] == "demo.orders"
    assert cfg.kafka.bootstrap_servers == "h:1"


def test_a_bad_config_is_a_config_error_naming_the_key(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[kafka]\nbootstrap_servers = "h:1"\nbootstrap = "typo"\n')
    with pytest.raises(ConfigError, match="kafka.bootstrap"):
        load_demo_config(path, env={})
    with pytest.raises(ConfigError, match="not found"):
        load_demo_config(tmp_path / "missing.toml", env={})


def test_demo_toml_declares_the_rules_the_stream_violates():
    raw = tomllib.loads(DEMO_CONFIG.read_text())
    rules = {(r["message_type"], r["expectation"]): r for r in raw["quality"]["expectations"]}
    qty = rules[("shop.v1.Order.LineItem", "expect_column_values_to_be_between")]
    assert qty["policy"] == "quarantine"
    assert (qty["kwargs"]["min_value"], qty["kwargs"]["max_value"]) == QUANTITY_RANGE
    assert qty["kwargs"]["column"] == "quantity"
    email = rules[("shop.v1.Customer", "expect_column_values_to_match_regex")]
    assert email["policy"] == "warn" and email["kwargs"] == {
        "column": "email",
        "regex": EMAIL_PATTERN,
    }


def test_demo_toml_rules_pass_great_expectations_validation():
    from quality.rules import parse_rules

    cfg = load_demo_config(env={})
    rules = parse_rules(cfg.quality.expectations)
    assert len(rules) == len(cfg.quality.expectations) == 3


def _summary(records: int, lineitems: int, dq: int) -> DemoStreamSummary:
    return DemoStreamSummary(
        topic_prefix="p.",
        seed=1,
        records=records,
        per_message_type={"shop.v1.Order": 10, "shop.v1.Order.LineItem": lineitems},
        poison_by_kind={"empty_value": 2, "wrong_magic": 1},
        poison_by_reason={"EMPTY_VALUE": 2, "BAD_MAGIC": 1},
        dq_violations={DQ_QUANTITY: dq, DQ_EMAIL: 4},
    )


def test_expected_counts_of_several_streams_add_up():
    a, b = _summary(30, 17, 2), _summary(40, 27, 3)
    merged = expected_counts([a, b], dq_quarantined=True)
    assert merged["records"] == 70
    assert merged["silver_by_type"] == {"shop.v1.Order": 20, "shop.v1.Order.LineItem": 17 + 27 - 5}
    assert merged["quarantine_by_reason"] == {"BAD_MAGIC": 2, "DQ_FAILED": 5, "EMPTY_VALUE": 4}
    plain = expected_counts([a], dq_quarantined=False)
    assert plain["silver_by_type"]["shop.v1.Order.LineItem"] == 17
    assert "DQ_FAILED" not in plain["quarantine_by_reason"]


def _report(**overrides):
    report = DemoReport(lakehouse="/lh", topics=["p.orders"], records_on_topics=30)
    report.expected = expected_counts([_summary(30, 17, 2)], dq_quarantined=True)
    report.stages = {"bronze": "ran in 1.0 s", "silver": "ran in 2.0 s"}
    report.tables = [
        {"layer": "bronze", "table": "p_orders", "path": "file:/lh/bronze/p_orders", "rows": 30},
        {
            "layer": "quarantine",
            "table": "records",
            "path": "file:/lh/quarantine/records",
            "rows": 5,
        },
    ]
    report.bronze_rows = 30
    report.silver_by_type = {"shop.v1.Order": 10, "shop.v1.Order.LineItem": 15}
    report.quarantine_by_reason = {"BAD_MAGIC": 1, "DQ_FAILED": 2, "EMPTY_VALUE": 2}
    report.invariant = {
        "holds": True,
        "bronze": 30,
        "silver": 25,
        "quarantine": 5,
        "missing": 0,
        "in_both": 0,
        "duplicated": 0,
        "orphans": 0,
        "bronze_duplicates": 0,
        "offenders": {},
    }
    for key, value in overrides.items():
        setattr(report, key, value)
    evaluate_checks(report)
    return report


def test_a_lakehouse_matching_the_stream_passes_every_check():
    report = _report()
    assert report.ok and len(report.checks) == 4
    text = format_report(report)
    assert "Invariant bronze = silver + quarantine: 30 = 25 + 5  HOLDS" in text
    assert "bronze/p_orders" in text and "quarantine/records" in text
    assert "[FAILED]" not in text
    assert json.loads(json.dumps(report.to_dict()))["ok"] is True


def test_mismatches_fail_the_matching_check():
    lost = _report(bronze_rows=29)
    assert not lost.ok and not lost.checks["bronze holds every record on the topics"]
    wrong_reason = _report(quarantine_by_reason={"BAD_MAGIC": 3, "DQ_FAILED": 2})
    assert not wrong_reason.checks["quarantine by reason as the stream predicts"]
    assert "[FAILED] quarantine by reason as the stream predicts" in format_report(wrong_reason)
    broken = _report(
        invariant={
            "holds": False,
            "bronze": 30,
            "silver": 25,
            "quarantine": 4,
            "missing": 1,
            "in_both": 0,
            "duplicated": 0,
            "orphans": 0,
            "bronze_duplicates": 0,
            "offenders": {
                "missing": [{"topic": "p.orders", "partition": 1, "offset": 7, "found_in": []}]
            },
        }
    )
    text = format_report(broken)
    assert not broken.ok and "VIOLATED" in text and "missing: p.orders[1]@7" in text


def test_expected_counts_are_not_compared_when_the_topics_hold_other_records():
    report = _report(records_on_topics=60, bronze_rows=60)
    assert "silver rows per message type as the stream predicts" not in report.checks


def test_protolake_demo_is_registered_with_an_optional_config():
    parser = build_parser("demo")
    args = parser.parse_args(
        ["demo", "--lakehouse", "/tmp/x", "--records", "10", "--append", "--json"]
    )
    assert args.config is None and args.lakehouse == "/tmp/x" and args.records == 10
    assert args.append and args.json and args.topic_prefix == "demo."
    assert args.func is run_from_args


def test_negative_counts_are_refused(capsys):
    args = build_parser("demo").parse_args(["demo", "--records", "-1"])
    assert run_from_args(args) == 2
    assert "--records" in capsys.readouterr().err


def test_quality_results_must_agree_with_the_quarantine():
    quality = [
        {
            "table": "a",
            "message_type": "shop.v1.Order.LineItem",
            "checked": 17,
            "passed": 15,
            "quarantined": 2,
        },
        {
            "table": "b",
            "message_type": "shop.v1.Order",
            "checked": 10,
            "passed": 10,
            "quarantined": 0,
        },
    ]
    agree = _report(quality=quality, dq_failed_rows=2)
    assert agree.ok and agree.checks["quality results count every DQ_FAILED row"]
    assert (
        "quarantined by quality: 2 (quality results), 2 (DQ_FAILED rows in quarantine)"
        in format_report(agree)
    )
    lost = _report(
        quality=[{**quality[0], "checked": 0, "quarantined": 0}, quality[1]], dq_failed_rows=2
    )
    assert not lost.ok and not lost.checks["quality results count every DQ_FAILED row"]


def test_every_silver_table_must_have_quality_results():
    silver = [
        {"layer": "silver", "table": name, "path": f"file:/lh/silver/{name}", "rows": 1}
        for name in ("orders", "customers")
    ]
    quality = [{"table": "orders", "checked": 1, "passed": 1, "quarantined": 0}]
    tables = _report().tables + silver
    partial = _report(tables=tables, quality=quality)
    assert not partial.ok and not partial.checks["every silver table has quality results"]
    assert "[FAILED] every silver table has quality results" in format_report(partial)
    complete = _report(tables=tables, quality=[*quality, {**quality[0], "table": "customers"}])
    assert complete.checks["every silver table has quality results"]
    assert "every silver table has quality results" not in _report().checks  # no quality


def test_the_demo_refuses_a_trigger_that_would_never_return():
    parser = build_parser("demo")
    assert parser.parse_args(["demo"]).trigger == "available-now"
    with pytest.raises(SystemExit):
        parser.parse_args(["demo", "--trigger", "processing-time"])


def test_the_demo_uses_the_stack_metastore_only_for_its_own_lakehouse(tmp_path):
    cfg = load_demo_config(env={"PROTOLAKE_METASTORE_PORT": "19083"})
    assert cfg.catalog.metastore_uri == "thrift://127.0.0.1:19083"
    assert load_demo_config(env={}).catalog.metastore_uri == "thrift://127.0.0.1:9083"
    # another lakehouse must not take the shared names (silver.<table>, ...)
    other = load_demo_config(lakehouse=str(tmp_path / "lh"), env={})
    assert other.catalog.metastore_uri == "" and other.catalog.silver_database == "silver"


@pytest.mark.parametrize(("recorded", "warned"), [(None, True), (12, True), (30, False)])
def test_records_no_recorded_stream_accounts_for_are_said_unchecked(
    recorded: int | None, warned: bool
) -> None:
    report = DemoReport(lakehouse="/lh", topics=["p.orders"], records_on_topics=30)
    if recorded is not None:
        report.expected = {"records": recorded, "silver_by_type": {}, "quarantine_by_reason": {}}
    text = format_report(report)
    assert "the topics already hold 30 records" in text
    assert ("no demo stream recorded in this lakehouse accounts for them" in text) is warned
