"""Bronze through Kafka security settings, for real: the stack's broker has a SASL_PLAINTEXT
listener (mechanism PLAIN, infra/stack.sh) next to its plaintext one.

The credentials travel as `${env:...}` in the configuration's [kafka.options], reach Spark's
Kafka source (bronze) and librdkafka (`protolake status`'s offsets), and never appear in a
log record or in a file the pipeline wrote.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
from bronze_itkit import BOOTSTRAP, Kafka, only, read_bronze, unique_prefix, write_config
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from pipelines import bronze
from pipelines.settings import load_config
from pipelines.ops.status import kafka_offsets

pytestmark = pytest.mark.integration

SASL_PORT = int(os.environ.get("PROTOLAKE_KAFKA_SASL_PORT", int(BOOTSTRAP.rsplit(":", 1)[1]) + 2))
SASL_BOOTSTRAP = f"127.0.0.1:{SASL_PORT}"
# The stack's fixed test credential (infra/stack.sh); a loopback test broker, not a secret.
USER, PASSWORD = "protolake", "protolake-test"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="{USER}" password="{PASSWORD}";'
)
OPTIONS = """[kafka.options]
"security.protocol" = "SASL_PLAINTEXT"
"sasl.mechanism" = "PLAIN"
"sasl.jaas.config" = "${env:PROTOLAKE_IT_KAFKA_JAAS}"
"""


def _refused(password: str) -> bool:
    admin = AdminClient(
        {
            "bootstrap.servers": SASL_BOOTSTRAP,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": USER,
            "sasl.password": password,
            "log_level": 0,
        }
    )
    try:
        admin.list_topics(timeout=5)
    except KafkaException:
        return True
    return False


@pytest.mark.timeout(900)
def test_bronze_over_sasl_plain_never_writes_the_secret(
    spark: Any, kafka: Kafka, tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    assert _refused("not-the-password"), "the SASL listener must authenticate"
    assert not _refused(PASSWORD)
    topic = f"{unique_prefix('sasl')}.orders"
    kafka.create_topics(topic)
    kafka.produce(topic, 30)
    monkeypatch.setenv("PROTOLAKE_IT_KAFKA_JAAS", JAAS)
    lake = tmp_path / "lake"
    cfg_file = write_config(
        tmp_path / "c.toml", lake, SASL_BOOTSTRAP, topics=[topic], extra=OPTIONS
    )
    assert PASSWORD not in cfg_file.read_text()
    cfg = load_config(cfg_file)

    with caplog.at_level(logging.DEBUG):
        queries = bronze.run(cfg, trigger="available-now", spark=spark)
        offsets = kafka_offsets(cfg, [topic])  # librdkafka, from the same options

    assert bronze.summarize(queries, cfg)["records"] == 30
    got, count = read_bronze(spark, lake / "bronze" / bronze.bronze_table_of_topic(topic))
    assert count == 30 and got == only(kafka.expected, topic)
    assert sum(high - low for low, high in offsets.values()) == 30
    assert {t for t, _ in offsets} == {topic}
    assert caplog.records, "the bronze job logs its configuration"
    assert PASSWORD not in caplog.text
    for path in lake.rglob("*"):  # Delta logs, checkpoints, data files
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path
