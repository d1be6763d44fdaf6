"""The streaming DAG's health probe through Kafka security settings, for real: the stack's
broker has a SASL_PLAINTEXT listener (mechanism PLAIN, infra/stack.sh). With the credentials
in ``sasl.jaas.config`` (``${env:...}``, as bronze reads them), the probe's librdkafka client
must log in and measure the bronze lag; an unknown lag would never make a hung stream stale.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from lakehouse.layout import Layout
from tests.support.airflow_kit import make_airflow
from tests.support.checkpoints import write_checkpoint_batch
from tests.support.stack import BOOTSTRAP

pytestmark = pytest.mark.integration

SASL_PORT = int(os.environ.get("PROTOLAKE_KAFKA_SASL_PORT", int(BOOTSTRAP.rsplit(":", 1)[1]) + 2))
# The stack's fixed test credential (infra/stack.sh); a loopback test broker, not a secret.
USER, PASSWORD = "protolake", "protolake-test"
PROBE = """
import json, logging, sys
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
from protolake_support.environment import config_path
from protolake_support.progress import judge_stream, stream_parts
parts = stream_parts("bronze", config_path())
stuck = judge_stream("bronze", 12345, parts, 60.0, running_seconds=3600)
print(json.dumps({"lag": [lag for _, _, lag in parts], "verdict": stuck.verdict}))
"""


@pytest.mark.timeout(600)
def test_the_bronze_lag_is_measured_through_sasl_with_jaas_credentials(
    bootstrap: str, registry_url: str, topic_prefix: str, tmp_path: Path
) -> None:
    topic = f"{topic_prefix}sasl"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(7):
        producer.produce(topic, value=f"r{i}".encode())
    assert producer.flush(30) == 0

    # a bronze checkpoint whose last planned batch starts at offset 2 (Spark's offset log:
    # version, metadata, one JSON line per source): 5 records are waiting
    lake = tmp_path / "lake"
    checkpoint = Path(Layout(str(lake)).checkpoint("bronze", "per_topic"))
    write_checkpoint_batch(checkpoint, 0, {topic: {"0": 2}}, committed=False)
    config = tmp_path / "protolake.toml"
    config.write_text(
        f'[lakehouse]\npath = "{lake}"\n'
        f'[kafka]\nbootstrap_servers = "127.0.0.1:{SASL_PORT}"\ntopics = ["{topic}"]\n'
        '[kafka.options]\n"security.protocol" = "SASL_PLAINTEXT"\n"sasl.mechanism" = "PLAIN"\n'
        '"sasl.jaas.config" = "${env:PROTOLAKE_IT_KAFKA_JAAS}"\n'
        '[registry]\nurl = "${env:PROTOLAKE_REGISTRY_URL}"\n'
    )
    airflow = make_airflow(tmp_path / "airflow", config, registry_url, tmp_path / "streams")
    airflow.env["PROTOLAKE_IT_KAFKA_JAAS"] = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{USER}" password="{PASSWORD}";'
    )
    seen, proc = airflow.python_run(PROBE)
    assert seen == {"lag": [5], "verdict": "stale"}, proc.stderr[-5000:]
    assert PASSWORD not in proc.stdout + proc.stderr  # DEBUG logging included
