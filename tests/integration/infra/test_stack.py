"""infra/stack.sh for real: the running stack carries records, and a private stack on its own
ports and run folder goes up, down, and up again with its data."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.stack import BOOTSTRAP, free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
STACK = ROOT / "infra" / "stack.sh"
REGISTRY_URL = os.environ.get("PROTOLAKE_REGISTRY_URL", "http://127.0.0.1:8081")


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    errors: list[object] = []
    for key, value in records:
        producer.produce(topic, value, key, on_delivery=lambda err, _m: err and errors.append(err))
    assert producer.flush(30) == 0
    assert errors == []


def _consume(
    bootstrap: str, topic: str, n: int, timeout: float = 30.0
) -> list[tuple[bytes, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"infra-test-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return got


def test_running_stack_carries_a_protobuf_record(proto_modules):
    status = subprocess.run([str(STACK), "status"], capture_output=True, text=True, check=False)
    assert status.returncode == 0, status.stdout + status.stderr
    _, orders_pb2 = proto_modules
    topic = f"infra-test-{uuid.uuid4().hex[:8]}"
    client = SchemaRegistryClient({"url": REGISTRY_URL})
    ctx = SerializationContext(topic, MessageField.VALUE)
    order = orders_pb2.Order(id="o-42", iban="DE00")
    value = ProtobufSerializer(orders_pb2.Order, client, {})(order, ctx)

    try:
        _produce(BOOTSTRAP, topic, [(b"o-42", value)])
        [(key, got)] = _consume(BOOTSTRAP, topic, 1)

        assert key == b"o-42"
        fresh = SchemaRegistryClient({"url": REGISTRY_URL})
        assert ProtobufDeserializer(orders_pb2.Order, {}, fresh)(got, ctx) == order
    finally:
        # The stack is shared: leave no test topic or subject behind.
        admin = AdminClient({"bootstrap.servers": BOOTSTRAP})  # kept alive until the future is done
        admin.delete_topics([topic])[topic].result(30)
        client.delete_subject(f"{topic}-value")
        client.delete_subject(f"{topic}-value", permanent=True)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_private_stack_lifecycle(tmp_path):
    kafka_port, controller_port, registry_port = free_port(), free_port(), free_port()
    run = tmp_path / "run dir"  # a path with a space: every service's options keep it whole
    env = {
        **os.environ,
        "PROTOLAKE_RUN_DIR": str(run),
        "PROTOLAKE_KAFKA_BOOTSTRAP": f"127.0.0.1:{kafka_port}",
        "PROTOLAKE_KAFKA_CONTROLLER_PORT": str(controller_port),
        "PROTOLAKE_KAFKA_SASL_PORT": str(free_port()),
        "PROTOLAKE_REGISTRY_URL": f"http://127.0.0.1:{registry_port}",
        "PROTOLAKE_KAFKA_HEAP": "256m",
        # `up` starts the analysts' services too: on ports of their own
        "PROTOLAKE_METASTORE_PORT": str(free_port()),
        "PROTOLAKE_SQL_PORT": str(free_port()),
    }
    bootstrap = f"127.0.0.1:{kafka_port}"
    registry = f"http://127.0.0.1:{registry_port}"

    def stack(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(STACK), *args], env=env, capture_output=True, text=True, timeout=420, check=False
        )

    run.mkdir()
    (run / "kafka-cluster-id").write_text("")  # an id drawn only in part: drawn again
    try:
        up = stack("up")
        assert up.returncode == 0, up.stdout + up.stderr
        assert (run / "kafka-cluster-id").read_text().strip()
        assert f"PROTOLAKE_KAFKA_BOOTSTRAP={bootstrap}" in up.stdout
        assert f"PROTOLAKE_REGISTRY_URL={registry}" in up.stdout
        status = stack("status")
        assert status.returncode == 0
        assert "kafka     running" in status.stdout and "registry  running" in status.stdout
        kafka_pid = (run / "pids" / "kafka.pid").read_text().strip()
        assert (run / "logs" / "kafka.log").stat().st_size > 0

        again = stack("up")  # a no-op while running: same process
        assert again.returncode == 0
        assert f"kafka already running (pid {kafka_pid})" in again.stdout

        _produce(bootstrap, "lifecycle", [(b"k1", b"v1"), (b"k2", b"v2")])
        schema = 'syntax = "proto3";\npackage life;\nmessage L { string x = 1; }\n'
        schema_id = requests.post(
            f"{registry}/subjects/lifecycle-value/versions",
            json={"schema": schema, "schemaType": "PROTOBUF"},
            timeout=10,
        ).json()["id"]

        # A lost pid folder does not orphan the processes: they are found by command line.
        for pid_file in (run / "pids").iterdir():
            pid_file.unlink()
        assert stack("status").returncode == 0
        assert (run / "pids" / "kafka.pid").read_text().strip() == kafka_pid

        down = stack("down")
        assert down.returncode == 0, down.stdout + down.stderr
        assert not _port_open(kafka_port) and not _port_open(registry_port)
        stopped = stack("status")
        assert stopped.returncode != 0
        assert "kafka     stopped" in stopped.stdout and "registry  stopped" in stopped.stdout

        up2 = stack("up")
        assert up2.returncode == 0, up2.stdout + up2.stderr
        assert "formatting" not in up2.stdout  # storage kept, not re-formatted
        assert sorted(_consume(bootstrap, "lifecycle", 2)) == [(b"k1", b"v1"), (b"k2", b"v2")]
        kept = requests.get(f"{registry}/schemas/ids/{schema_id}", timeout=10).json()
        assert kept["schema"] == schema
    finally:
        stack("down")
    assert not _port_open(kafka_port)


def test_up_refuses_a_port_held_by_another_process(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        env = {
            **os.environ,
            "PROTOLAKE_RUN_DIR": str(tmp_path / "run"),
            "PROTOLAKE_REGISTRY_URL": f"http://127.0.0.1:{port}",
        }
        result = subprocess.run(
            [str(STACK), "up", "registry"], env=env, capture_output=True, text=True, timeout=60
        )
    assert result.returncode != 0
    assert f"port {port} is in use" in result.stderr


def test_private_apicurio_lifecycle(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "PROTOLAKE_RUN_DIR": str(tmp_path / "run"),
        "PROTOLAKE_APICURIO_PORT": str(port),
    }
    url = f"http://127.0.0.1:{port}/apis/ccompat/v7"

    def stack(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(STACK), *args], env=env, capture_output=True, text=True, timeout=420, check=False
        )

    try:
        up = stack("up", "apicurio")
        assert up.returncode == 0, up.stdout + up.stderr
        pid = (tmp_path / "run" / "pids" / "apicurio.pid").read_text().strip()
        assert f"apicurio  running  pid {pid}  url {url}" in stack("status").stdout
        assert f"apicurio already running (pid {pid})" in stack("up", "apicurio").stdout
        text = 'syntax = "proto3";\npackage apilife;\nmessage A { string x = 1; }\n'
        answer = requests.post(
            f"{url}/subjects/apilife%2Fa.proto/versions",
            json={"schema": text, "schemaType": "PROTOBUF"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        got = requests.get(f"{url}/schemas/ids/{answer.json()['id']}", timeout=10).json()
        assert got["schema"] == text
        down = stack("down", "apicurio")
        assert down.returncode == 0, down.stdout + down.stderr
        assert "apicurio stopped" in down.stdout
        assert not _port_open(port)
        assert "apicurio  stopped" in stack("status").stdout
    finally:
        stack("down", "apicurio")
    assert not _port_open(port)


def test_a_running_process_that_does_not_answer_is_not_taken_for_the_service(tmp_path):
    # e.g. a broker still shutting down after a start that failed: `up` must not say it runs
    run, port = tmp_path / "run", free_port()
    marker = f"--port {port} --data {run}/registry.json"  # as the stack's registry is started
    silent = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", *marker.split()]
    )
    env = {
        **os.environ,
        "PROTOLAKE_RUN_DIR": str(run),
        "PROTOLAKE_REGISTRY_URL": f"http://127.0.0.1:{port}",
        "PROTOLAKE_START_TIMEOUT": "3",  # how long a running one is given to answer
    }
    try:
        result = subprocess.run(
            [str(STACK), "up", "registry"], env=env, capture_output=True, text=True, timeout=90
        )
        assert result.returncode != 0, result.stdout
        assert f"registry runs (pid {silent.pid}) but does not answer" in result.stderr
        assert "already running" not in result.stdout
    finally:
        silent.kill()
        silent.wait()
