"""The object store stops in the middle of a bronze run, or of a silver run, on an ``s3a://``
lakehouse: the batch in flight fails, the run fails, nothing half-written counts; once the
store is back (and the dead run's writer lease has expired) the job resumes and every Kafka
record is in bronze exactly once, and every bronze record in silver or quarantine exactly once.

The store is a private SeaweedFS (``infra/stack.sh up s3`` with a run folder and ports of its
own), stopped and started again like the stack's; its data folder survives the restart."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from lakehouse.layout import Layout
from pipelines import bronze, silver
from pipelines.demo.produce import produce_demo_stream
from pipelines.naming import bronze_table_of_topic
from pipelines.quarantine import check_invariant
from pipelines.settings import parse_config
from tests.support.s3 import S3Store
from tests.support.stack import BOOTSTRAP, ROOT

pytestmark = pytest.mark.integration

RECORDS = 240
PER_BATCH = 20  # kafka.max_offsets_per_trigger: twelve batches, the store stops during one
# the writer lease's ttl: its first put to a store just started again takes seconds (5 s
# measured), and a lease renewed only after its expiry is lost (lakehouse.lease)
LEASE_SECONDS = 15.0
# Fail fast while the store is down (S3A's defaults retry for minutes); per bucket, so the
# shared session's other buckets keep theirs.
FAIL_FAST = {
    "attempts.maximum": "1",
    "retry.limit": "1",
    "retry.interval": "200ms",
    "retry.throttle.limit": "1",
    "connection.establish.timeout": "1s",
    "connection.timeout": "2s",
}


# SeaweedFS listens on base..base+3 and on each of those + 10000 (gRPC). All eight stay below
# the kernel's ephemeral range (32768 and up here): a port in it can be the local end of any
# client connection at the moment the store starts, or restarts, and the bind then fails.
BASE_PORTS = range(20000, 32768 - 10000 - 3)


def _ports_free(base: int) -> bool:
    """Whether nothing holds any of the store's ports (a listener, or any socket bound there)."""
    for port in (base, base + 1, base + 2, base + 3):
        for p in (port, port + 10000):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    return False
    return True


class PrivateStore:
    """A SeaweedFS of this test's own, started and stopped through ``infra/stack.sh``."""

    def __init__(self, run: Path) -> None:
        base = next(b for b in (random.choice(BASE_PORTS) for _ in range(50)) if _ports_free(b))
        # A bucket of its own: the session's S3A file systems are cached per bucket, and one
        # made for an earlier test's store (another port, stopped) must not be reused.
        self.bucket = f"outage-{uuid.uuid4().hex[:8]}"
        self.env = {
            **os.environ,
            "PROTOLAKE_RUN_DIR": str(run),
            "PROTOLAKE_S3_PORT": str(base),
            "PROTOLAKE_S3_BUCKETS": self.bucket,
        }
        self.run = run

    def stack(self, action: str) -> None:
        done = subprocess.run(
            [str(ROOT / "infra/stack.sh"), action, "s3"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    def store(self) -> S3Store:
        values = dict(
            line.split("=", 1)
            for line in (self.run / "s3.env").read_text().splitlines()
            if "=" in line and not line.startswith("#")
        )
        return S3Store(
            values["AWS_ENDPOINT_URL"],
            values["AWS_ACCESS_KEY_ID"],
            values["AWS_SECRET_ACCESS_KEY"],
            values["AWS_REGION"],
        )


@pytest.fixture
def private_store(tmp_path: Path) -> Iterator[PrivateStore]:
    handle = PrivateStore(tmp_path / "run")
    handle.stack("up")
    try:
        yield handle
    finally:
        handle.stack("down")


def _produce(topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": BOOTSTRAP})
    for i in range(RECORDS):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0


def _fail_fast(spark: Any, bucket: str) -> None:
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in FAIL_FAST.items():
        hadoop.set(f"fs.s3a.bucket.{bucket}.{key}", value)


def _stop_during_a_batch(
    store: PrivateStore, s3: S3Store, checkpoint_key: str, batch_offsets: str = "/offsets/2"
) -> threading.Thread:
    """Stop the store once a query under ``checkpoint_key`` has logged the offsets of a batch
    (by default bronze's third)."""

    def watch() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if any(k.endswith(batch_offsets) for k in s3.keys(store.bucket, checkpoint_key)):
                store.stack("down")
                return
            time.sleep(0.1)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_store_stopped_mid_run_fails_the_batch_and_the_restart_lands_every_record_once(
    spark: Any, private_store: PrivateStore
) -> None:
    s3 = private_store.store()
    topic = f"s3outage.{uuid.uuid4().hex[:8]}"
    _produce(topic)
    lake = f"s3a://{private_store.bucket}/lh"
    cfg = parse_config(
        {
            "lakehouse": {"path": lake, "writer_lease_seconds": LEASE_SECONDS},
            "kafka": {
                "bootstrap_servers": BOOTSTRAP,
                "topics": [topic],
                "max_offsets_per_trigger": PER_BATCH,
            },
            "s3": s3.section(),
            "catalog": {"bronze_database": ""},
        }
    )
    _fail_fast(spark, private_store.bucket)
    checkpoints = Layout(lake).checkpoints.split(f"{private_store.bucket}/", 1)[1]

    watcher = _stop_during_a_batch(private_store, s3, checkpoints)
    # the store's error, as S3A words it (or as the writer lease quotes it, when its renewal
    # met the outage first)
    with pytest.raises(Exception, match=r"(?i)connect"):
        bronze.run(cfg, trigger="available-now", spark=spark)
    watcher.join(timeout=60)
    assert not watcher.is_alive()

    private_store.stack("up")  # same data folder: what was committed is still there
    table = Layout(lake).bronze_table(bronze_table_of_topic(topic))
    landed = spark.read.format("delta").load(table).count()
    assert 0 < landed < RECORDS, "the store stopped in the middle of the run"
    time.sleep(LEASE_SECONDS + 1)  # the failed run could not delete its lease: it expires
    bronze.run(cfg, trigger="available-now", spark=spark)

    rows = spark.read.format("delta").load(table)
    offsets = [r[0] for r in rows.select("offset").collect()]
    assert len(offsets) == RECORDS, "every record once: none lost, none twice"
    assert sorted(offsets) == list(range(RECORDS))


def test_a_store_stopped_mid_silver_batch_fails_it_and_the_restart_lands_every_record_once(
    spark: Any, registry: Any, private_store: PrivateStore
) -> None:
    s3 = private_store.store()
    # two topics of the demo stream (orders, inventory): an awaited run takes its queries one
    # after the other, so the second still runs when a first one committed before the store
    # went down; each table more would be a query more in each of the two silver runs
    prefix = f"s3outage.{uuid.uuid4().hex[:8]}."
    topics = [f"{prefix}orders", f"{prefix}inventory"]
    part = produce_demo_stream(BOOTSTRAP, registry.url, topic_prefix=prefix, records=60).on_topics(
        topics
    )
    lake = f"s3a://{private_store.bucket}/lh"
    no_catalog = {f"{layer}_database": "" for layer in ("bronze", "silver", "quarantine")}
    cfg = parse_config(
        {
            "lakehouse": {"path": lake, "writer_lease_seconds": LEASE_SECONDS},
            "kafka": {"bootstrap_servers": BOOTSTRAP, "topics": topics},
            "registry": {"url": registry.url},
            "s3": s3.section(),
            "catalog": {**no_catalog, "quality_database": ""},
        }
    )
    _fail_fast(spark, private_store.bucket)
    bronze.run(cfg, trigger="available-now", spark=spark)
    silver_checkpoints = (
        Layout(lake).checkpoints.split(f"{private_store.bucket}/", 1)[1] + "/silver"
    )

    watcher = _stop_during_a_batch(private_store, s3, silver_checkpoints, "/offsets/0")
    with pytest.raises(Exception, match=r"(?i)connect"):
        silver.run(cfg, trigger="available-now", spark=spark)
    watcher.join(timeout=60)
    assert not watcher.is_alive()

    private_store.stack("up")
    assert not check_invariant(spark, lake).holds, "the store stopped before silver was done"
    time.sleep(LEASE_SECONDS + 1)  # the failed run's lease expires
    silver.run(cfg, trigger="available-now", spark=spark)

    report = check_invariant(spark, lake)
    assert report.holds, report.summary()
    assert report.bronze_records == part.records
