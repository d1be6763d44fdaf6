"""Quality checks inside the silver micro-batch: quarantine policy and fail policy."""

from __future__ import annotations

from typing import Any

import pytest
from silver_testkit import bronze_row, write_bronze

from codec import SchemaResolver, open_registry
from pipelines.naming import table_name_for
from pipelines.quarantine import check_invariant, list_delta_tables, quarantine_path
from pipelines.silver import SilverBatch

TOPIC = "ut.pings"
PING = "silvertest.v1.Ping"


def _batch(spark: Any, lake: str, registry: Any, rules: list[dict[str, Any]]) -> SilverBatch:
    from quality import QualityChecker, parse_rules

    parsed = parse_rules(rules)
    return SilverBatch(
        spark,
        lake,
        "77777777-7777-7777-7777-777777777777",
        SchemaResolver(open_registry(registry.url)),
        checker=QualityChecker(spark, lake, parsed),
        quality_types=frozenset(r.message_type for r in parsed),
    )


@pytest.fixture(scope="module")
def pings(producer: Any, versions: Any) -> list[tuple[Any, ...]]:
    v1 = versions["v1"]
    ids = ["good-1", "bad-2", "good-3", "bad-4"]
    return [bronze_row(producer.frame(v1.Ping(id=i), TOPIC), TOPIC, n) for n, i in enumerate(ids)]


def test_quarantine_policy_moves_failing_rows(
    spark: Any, tmp_path: Any, registry: Any, pings: Any
) -> None:
    lake = str(tmp_path / "lake")
    bronze = f"{lake}/bronze/ut_pings"
    write_bronze(spark, bronze, pings)
    rule = {
        "message_type": PING,
        "expectation": "expect_column_values_to_match_regex",
        "kwargs": {"column": "id", "regex": "^good-"},
        "policy": "quarantine",
    }
    _batch(spark, lake, registry, [rule])(spark.read.format("delta").load(bronze), 0)
    kept = spark.read.format("delta").load(f"{lake}/silver/{table_name_for(PING)}")
    assert sorted(r["id"] for r in kept.collect()) == ["good-1", "good-3"]
    q = spark.read.format("delta").load(quarantine_path(lake)).collect()
    assert sorted(r["_kafka_offset"] for r in q) == [1, 3]
    assert {(r["reason_code"], r["stage"], r["_message_type"]) for r in q} == {
        ("DQ_FAILED", "quality", PING)
    }
    assert all("expect_column_values_to_match_regex" in r["reason"] for r in q)
    assert all(r["value"] == bytearray(pings[r["_kafka_offset"]][1]) for r in q)
    assert check_invariant(spark, lake).holds


def test_fail_policy_commits_nothing(spark: Any, tmp_path: Any, registry: Any, pings: Any) -> None:
    from quality import QualityFailed

    lake = str(tmp_path / "lake")
    bronze = f"{lake}/bronze/ut_pings"
    write_bronze(spark, bronze, pings)
    rule = {
        "message_type": PING,
        "expectation": "expect_column_values_to_match_regex",
        "kwargs": {"column": "id", "regex": "^good-"},
        "policy": "fail",
    }
    with pytest.raises(QualityFailed):
        _batch(spark, lake, registry, [rule])(spark.read.format("delta").load(bronze), 0)
    assert list_delta_tables(spark, f"{lake}/silver") == []
    assert list_delta_tables(spark, f"{lake}/quarantine") == []
