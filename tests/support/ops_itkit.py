"""Helpers of the ops integration tests (see conftest.py)."""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from registry_server import start_registry_server

from tests.support.stack import BOOTSTRAP, free_port_pair

if TYPE_CHECKING:
    from pipelines.demo.stream import StreamPart

ROOT = Path(__file__).resolve().parents[2]

LATE_SCHEMA = """syntax = "proto3";
package ops.v1;

message Ping {
  string id = 1;
  int64 n = 2;
}
"""
LATE_TYPE = "ops.v1.Ping"
LATE_RECORDS = 6


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ping_payload(ident: str, n: int) -> bytes:
    """A serialized ops.v1.Ping (field 1 string, field 2 int64), written by hand."""
    raw = ident.encode()
    return b"\x0a" + _varint(len(raw)) + raw + b"\x10" + _varint(n)


def framed(schema_id: int, payload: bytes) -> bytes:
    """Confluent framing: magic 0, schema id, message indexes [0] (one 0 byte)."""
    return b"\x00" + struct.pack(">I", schema_id) + b"\x00" + payload


@dataclass
class Lakehouse:
    root: Path
    cfg: Any
    config_file: Path
    registry: Any
    prefix: str
    demo: StreamPart  # what the lakehouse holds of the demo stream
    late_topic: str
    tx_topic: str
    late_schema_id: int
    late_values: dict[int, bytes] = field(default_factory=dict)  # offset -> value
    metrics_port: int = 0
    tx_committed: int = 0

    def close(self) -> None:
        self.registry.stop()


def _produce_late(topic: str, schema_id: int) -> dict[int, bytes]:
    from confluent_kafka import Producer

    from pipelines.demo.produce import ensure_topics

    ensure_topics(BOOTSTRAP, [topic], None, partitions=1)
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
    values: dict[int, bytes] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        values[msg.offset()] = msg.value()

    for i in range(LATE_RECORDS):
        p.produce(
            topic,
            key=f"k{i}".encode(),
            value=framed(schema_id, ping_payload(f"p{i}", 100 + i)),
            on_delivery=on_delivery,
        )
    assert p.flush(30) == 0
    return values


def _produce_transactions(topic: str) -> int:
    """Committed (3), aborted (2), committed (3) transactions; returns committed records."""
    from confluent_kafka import Producer

    from pipelines.demo.produce import ensure_topics

    ensure_topics(BOOTSTRAP, [topic], None, partitions=1)
    p = Producer({"bootstrap.servers": BOOTSTRAP, "transactional.id": f"ops-it-{uuid.uuid4()}"})
    p.init_transactions(30)
    committed = 0
    for n, commit in ((3, True), (2, False), (3, True)):
        p.begin_transaction()
        for i in range(n):
            p.produce(topic, value=f"tx-{commit}-{i}".encode())
        if commit:
            p.commit_transaction(30)
            committed += n
        else:
            p.flush(30)
            p.abort_transaction(30)
    return committed


def write_config(path: Path, lake: Path, topics: list[str], registry_url: str, port: int) -> Path:
    lines = [
        "[lakehouse]",
        f'path = "{lake}"',
        "[kafka]",
        f'bootstrap_servers = "{BOOTSTRAP}"',
        "topics = [" + ", ".join(f'"{t}"' for t in topics) + "]",
        "[kafka.options]",
        '"isolation.level" = "read_committed"',
        "[registry]",
        f'url = "{registry_url}"',
        "max_retries = 1",
        "timeout_seconds = 5.0",
        "[metrics]",
        f"prometheus_port = {port}",
        'prometheus_address = "127.0.0.1"',
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def build_lakehouse(spark: Any, tmp: Path) -> Lakehouse:
    """Produce the streams, run bronze then silver (available-now) into ``tmp/lakehouse``."""
    from pipelines import bronze, silver
    from pipelines.demo.produce import produce_demo_stream
    from pipelines.settings import load_config

    registry = start_registry_server(port=0)
    prefix = f"it.ops.{uuid.uuid4().hex[:8]}."
    # two of the demo's topics (orders, customers with framed keys) beside the late and the
    # transactional one: the commands treat every table alike, and each topic more is a query
    # more in every silver run of the tests
    demo = produce_demo_stream(
        BOOTSTRAP, registry.url, topic_prefix=prefix, records=80, seed=11, poison_every=8
    ).on_topics([f"{prefix}orders", f"{prefix}customers"])
    late_topic, tx_topic = f"{prefix}late", f"{prefix}tx"
    # the id the registry gives the next schema: nothing else registers before the test does
    late_id = registry.store.next_id
    late_values = _produce_late(late_topic, late_id)
    tx_committed = _produce_transactions(tx_topic)
    port = free_port_pair()  # bronze's metrics port, and silver's (the next)
    lake = tmp / "lakehouse"
    cfg_file = write_config(
        tmp / "protolake.toml", lake, [*demo.topics, late_topic, tx_topic], registry.url, port
    )
    cfg = load_config(cfg_file)
    bronze.run(cfg, spark=spark)
    silver.run(cfg, spark=spark)
    return Lakehouse(
        root=lake,
        cfg=cfg,
        config_file=cfg_file,
        registry=registry,
        prefix=prefix,
        demo=demo,
        late_topic=late_topic,
        tx_topic=tx_topic,
        late_schema_id=late_id,
        late_values=late_values,
        metrics_port=port,
        tx_committed=tx_committed,
    )
