"""Exactly once across a crash: SIGKILL the streaming bronze job mid-batch, restart it, and
every (topic, partition, offset) is in bronze exactly once, none missing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from lakehouse.checkpoint_guard import CheckpointInUseError, guard_checkpoint
from lakehouse.delta import read_batch_marker
from pipelines import bronze
from pipelines.settings import load_config
from tests.support.bronze_itkit import ROOT, Kafka, read_bronze, unique_prefix, write_config
from tests.support.delta_log import commit_actions

pytestmark = pytest.mark.integration


class BronzeProcess:
    """``python -m pipelines.cli bronze --trigger processing-time`` in its own process group."""

    def __init__(self, config: Path, log: Path) -> None:
        self.log = log
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pipelines.cli",
                "bronze",
                "--config",
                str(config),
                "--trigger",
                "processing-time",
            ],
            cwd=ROOT,
            env=env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: the kill reaches the JVM child too
        )

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait(timeout=30)

    def terminate(self, timeout: float = 180) -> int:
        """SIGTERM to the Python driver only, as a service manager would: a graceful stop."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def ensure_gone(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the JVM child, if it outlived its parent
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)

    def assert_alive(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            pytest.fail(f"bronze exited with {self.proc.returncode}:\n{tail}")


@pytest.fixture
def processes() -> Iterator[list[BronzeProcess]]:
    started: list[BronzeProcess] = []
    yield started
    for p in started:
        p.ensure_gone()


class ContinuousProducer(threading.Thread):
    """Produces ``chunk`` records per topic every ``pause`` seconds until stopped, recording
    every acknowledged record. A modest rate: the job must be able to catch up."""

    def __init__(self, kafka: Kafka, topics: list[str], chunk: int = 10, pause: float = 0.5):
        super().__init__(daemon=True)
        self.kafka, self.topics, self.chunk, self.pause = kafka, topics, chunk, pause
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.kafka.bootstrap, "linger.ms": 5})
        i = 1000  # the records produced before the thread started have lower numbers
        try:
            while not self.stop_event.wait(self.pause):
                for topic in self.topics:
                    self.kafka.produce(topic, self.chunk, start=i, producer=producer)
                i += self.chunk
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=60)
        assert self.error is None, f"producer failed: {self.error!r}"


def batch_in_flight(checkpoint: Path) -> int | None:
    """A batch planned (offsets/N) but not committed (commits/N), after one commit; else None."""

    def ids(folder: str) -> set[int]:
        d = checkpoint / folder
        return {int(p.name) for p in d.iterdir() if p.name.isdigit()} if d.is_dir() else set()

    offsets, commits = ids("offsets"), ids("commits")
    if not commits:
        return None
    pending = sorted(offsets - commits)
    return pending[-1] if pending else None


def table_of(topic: str) -> str:
    return bronze.bronze_table_of_topic(topic)


def count_rows(table: Path) -> int:
    """Rows of a bronze table, 0 before its first commit. delta-rs reads the log: no Spark job
    in this process while the job under test, in its own JVM, needs the two cores."""
    try:
        return DeltaTable(str(table)).to_pyarrow_dataset().count_rows()
    except TableNotFoundError:
        return 0


def wait_for(predicate: Any, timeout: float, what: str, proc: BronzeProcess) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.assert_alive()
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def test_sigkill_mid_stream_then_restart_is_exactly_once(
    spark: Any, kafka: Kafka, tmp_path: Path, processes: list[BronzeProcess]
) -> None:
    prefix = unique_prefix("kill")
    topics = [f"{prefix}.a", f"{prefix}.b"]
    kafka.create_topics(*topics, partitions=3)
    kafka.produce(topics[0], 100)
    lake = tmp_path / "lake"
    cfg_file = write_config(
        tmp_path / "c.toml",
        lake,
        kafka.bootstrap,
        pattern=prefix.replace(".", r"\.") + r"\..*",
        extra='[bronze]\nprocessing_interval = "1 second"\n',
    )
    cfg_file.write_text(
        cfg_file.read_text().replace("[kafka]\n", "[kafka]\nmax_offsets_per_trigger = 400\n")
    )
    cfg = load_config(cfg_file)
    checkpoint = Path(bronze.bronze_checkpoint(cfg))
    log = tmp_path / "bronze.log"

    producer = ContinuousProducer(kafka, topics)
    producer.start()
    first = BronzeProcess(cfg_file, log)
    processes.append(first)
    # Kill while a batch is planned but not committed (after at least one commit): the
    # hardest moment, its rows may or may not be in some tables already.
    killed_batch = wait_for(lambda: batch_in_flight(checkpoint), 600, "a batch in flight", first)
    # the running job holds its checkpoint: another process is refused before it writes
    with pytest.raises(CheckpointInUseError, match=f"pid {first.proc.pid} on "):
        guard_checkpoint(str(checkpoint))
    first.kill(signal.SIGKILL)
    landed_before = {
        t: count_rows(lake / "bronze" / bronze.bronze_table_of_topic(t)) for t in topics
    }
    assert sum(landed_before.values()) > 0, "nothing landed before the kill"

    second = BronzeProcess(cfg_file, log)
    processes.append(second)
    time.sleep(5)
    producer.stop()
    expected = dict(kafka.expected)
    assert len(expected) > sum(landed_before.values())

    def caught_up() -> bool:
        return sum(
            count_rows(lake / "bronze" / bronze.bronze_table_of_topic(t)) for t in topics
        ) >= len(expected)

    deadline = time.monotonic() + 600
    while not caught_up():
        second.assert_alive()
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:]
            pytest.fail(f"bronze did not catch up in 600 s:\n{tail}")
        time.sleep(0.5)
    time.sleep(3)  # a duplicate would need another batch: give it the chance to show
    assert second.terminate() == 0, log.read_text(errors="replace")[-3000:]

    got: dict = {}
    total = 0
    for t in topics:
        rows, count = read_bronze(spark, lake / "bronze" / bronze.bronze_table_of_topic(t))
        got.update(rows)
        total += count
    missing = set(expected) - set(got)
    assert not missing, f"{len(missing)} records missing, e.g. {sorted(missing)[:3]}"
    assert total == len(got), f"{total - len(got)} duplicate rows"
    assert got == expected
    assert killed_batch >= 1

    # Every commit names its batch; only the batch the restart ran again was looked up and
    # written with Delta's transaction ids, every other one was appended blind.
    commits = [c for t in topics for c in commit_actions(lake / "bronze" / table_of(t))]
    appends = [c for c in commits if "add" in c]
    assert appends and all(read_batch_marker(c["commitInfo"].get("userMetadata")) for c in appends)
    checked = {c["txn"]["version"] for c in appends if "txn" in c}
    assert len(checked) <= 1, f"batches written with transaction ids: {sorted(checked)}"
    assert all(batch >= killed_batch for batch in checked)
    assert any("txn" not in c for c in appends)
