"""Bronze's pure parts: Kafka source options, names and paths, the loggable configuration."""

from __future__ import annotations

import json

import pytest

from pipelines.bronze import (
    bronze_checkpoint,
    bronze_table_for,
    bronze_table_path,
    kafka_source_options,
    loggable_config,
)
from pipelines.settings import ProtolakeConfig, parse_config


def config(**sections: dict) -> ProtolakeConfig:
    kafka = {"bootstrap_servers": "b1:9092,b2:9092", "topics": ["shop.orders"]}
    kafka.update(sections.pop("kafka", {}))
    return parse_config({"kafka": kafka, "lakehouse": {"path": "/lh"}, **sections})


def test_topic_list_defaults() -> None:
    opts = kafka_source_options(config(kafka={"topics": ["a", "b.c"]}))
    assert opts == {
        "kafka.bootstrap.servers": "b1:9092,b2:9092",
        "subscribe": "a,b.c",
        "startingOffsets": "earliest",
        "failOnDataLoss": "true",
        "includeHeaders": "true",
        "kafka.isolation.level": "read_committed",
    }


def test_pattern_limits_and_pass_through_options() -> None:
    cfg = config(
        kafka={
            "topics": [],
            "topic_pattern": r"shop\..*",
            "starting_offsets": "latest",
            "max_offsets_per_trigger": 5000,
            "fail_on_data_loss": False,
            "options": {"security.protocol": "SASL_SSL", "sasl.jaas.config": "secret-jaas"},
        }
    )
    opts = kafka_source_options(cfg)
    assert opts["subscribePattern"] == r"shop\..*"
    assert "subscribe" not in opts
    assert opts["startingOffsets"] == "latest"
    assert opts["maxOffsetsPerTrigger"] == "5000"
    assert opts["failOnDataLoss"] == "false"
    assert opts["kafka.security.protocol"] == "SASL_SSL"
    assert opts["kafka.sasl.jaas.config"] == "secret-jaas"


def test_isolation_level_defaults_to_read_committed_and_can_be_overridden() -> None:
    assert kafka_source_options(config())["kafka.isolation.level"] == "read_committed"
    cfg = config(kafka={"options": {"isolation.level": "read_uncommitted"}})
    assert kafka_source_options(cfg)["kafka.isolation.level"] == "read_uncommitted"


def test_unlimited_offsets_per_trigger_sets_no_option() -> None:
    assert "maxOffsetsPerTrigger" not in kafka_source_options(config())


def test_loggable_config_hides_every_kafka_option_value() -> None:
    cfg = config(
        kafka={"options": {"security.protocol": "SSL-Q9", "ssl.truststore.location": "/p-Q9"}},
        registry={"basic_auth": "u:pw-Q9"},
    )
    text = json.dumps(loggable_config(cfg))
    assert "Q9" not in text
    assert json.loads(text)["kafka"]["options"] == {
        "security.protocol": "***",
        "ssl.truststore.location": "***",
    }
    # the configuration itself is untouched
    assert cfg.kafka.options["security.protocol"] == "SSL-Q9"


@pytest.mark.parametrize(
    ("topic", "table"),
    [("shop.orders", "shop_orders"), ("Shop-Orders.v1", "shop_orders_v1"), ("a_b", "a_b")],
)
def test_per_topic_table_names(topic: str, table: str) -> None:
    assert bronze_table_for(config(), topic) == table
    assert bronze_table_path(config(), table) == f"/lh/bronze/{table}"


def test_single_mode_uses_one_table_and_its_own_checkpoint() -> None:
    single = config(bronze={"table_mode": "single", "single_table": "all_records"})
    assert bronze_table_for(single, "shop.orders") == "all_records"
    assert bronze_table_for(single, "other") == "all_records"
    assert bronze_checkpoint(single) == "/lh/_checkpoints/bronze/all_records"
    assert bronze_checkpoint(config()) == "/lh/_checkpoints/bronze/per_topic"
