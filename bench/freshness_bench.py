"""Streaming freshness: how far behind Kafka silver is, with bronze and silver running as streams.

    .venv/bin/python bench/freshness_bench.py [--rate 1000] [--seconds 60] [--warmup 30]
        [--trigger "1 second"] [--max-offsets-per-trigger 0] [--shuffle-partitions 2]
        [--table-mode per_topic|single]

Needs the local stack (``infra/stack.sh up``: Kafka at PROTOLAKE_KAFKA_BOOTSTRAP, the schema
registry at PROTOLAKE_REGISTRY_URL). What it does, on fresh topics and a fresh lakehouse:

1. Generates ``rate x (warmup + seconds)`` records of the demo stream (the demo's real
   Confluent-framed Protobuf records, poison records and schema evolution included).
2. Starts silver, then bronze, each as its own ``protolake <job> --trigger processing-time``
   process (``local[2]``, as the streaming DAG runs them), with the demo's quality rules and a
   ``kafka.topic_pattern`` over the bench topics: silver starts before bronze has written any
   table and takes each bronze table as it appears. ``--table-mode`` is bronze's
   ``table_mode``: a bronze table per topic (a silver query each, the default) or one table
   for every topic (one silver query).
3. Produces the records at a steady ``--rate`` (records/s, Kafka's CreateTime is the
   produce time), for ``--warmup`` seconds (default 30: the jobs start, silver takes its
   first tables), then ``--seconds`` more (default 60).
4. Polls silver every ``--poll`` seconds (delta-rs and pyarrow, no JVM): each new commit of a
   silver table, its commit time and the ``_kafka_timestamp`` and ``_kafka_topic`` of the
   rows it added.

After the run, silver's start-up: from the first record produced to the first silver commit
with rows, and to the first commit with rows of each topic (both jobs start cold: JVM
start-up, the first query of each bronze table, the JIT compiler). Then, over the measured
window, from the later of the warm-up's end and silver's start-up to the last record
produced (a window after start-up still carries the backlog built up during it; when silver
has not shown every topic by the last record, the window starts at the warm-up's end and
includes start-up, and the bench says so):

- freshness: p50 and p95 of "now minus the newest Kafka timestamp visible in silver", polled;
- per record: p50 and p95 of silver commit time minus the record's Kafka timestamp;
- freshness through the window, 20 s at a time (p50 and largest of each slice): whether silver
  works off the backlog of its start-up, keeps up or falls behind;
- where silver's batches spent their time, each query's first batch apart (Spark's phases
  of each progress, and the steps of ``SilverBatch``: ``phases_seconds``/``steps_seconds``
  of the jobs' batch lines);
- micro-batch durations of bronze and silver (``triggerExecution`` of each query progress,
  from the jobs' ``--json`` metrics lines), records per batch, and silver batches of 300 to
  800 records apart (the "~500 records" figure).

Each figure is printed with its target and its ratio to it (``x target``; <= 1.0 meets
it); the baseline measured in the same run is the producer itself: the records it was asked
for against those it sent on time (a producer that cannot keep the rate makes every other
figure meaningless, and the bench says so).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BOOTSTRAP = os.environ.get("PROTOLAKE_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
REGISTRY = os.environ.get("PROTOLAKE_REGISTRY_URL", "http://127.0.0.1:8081")
TARGETS = {
    "freshness_p50": 5.0,
    "freshness_p95": 15.0,
    "silver_batch_500": 2.0,
    "bronze_batch": 1.5,
}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=int, default=1000, help="records per second (default 1000)")
    p.add_argument("--seconds", type=int, default=60, help="measured seconds (default 60)")
    p.add_argument("--warmup", type=int, default=30, help="seconds before measuring (30)")
    p.add_argument("--trigger", default="1 second", help="processing-time interval of both jobs")
    p.add_argument("--max-offsets-per-trigger", type=int, default=0, help="bronze's cap (0: none)")
    p.add_argument(
        "--table-mode",
        choices=("per_topic", "single"),
        default="per_topic",
        help="bronze.table_mode: a bronze table (and silver query) per topic, or one for all",
    )
    p.add_argument("--shuffle-partitions", type=int, default=2)
    p.add_argument("--poll", type=float, default=1.0, help="seconds between polls of silver")
    p.add_argument("--drain", type=int, default=60, help="seconds to wait for the last records")
    p.add_argument("--keep", action="store_true", help="keep the lakehouse and the job logs")
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting of both jobs ([spark.conf]), e.g. spark.sql.adaptive.enabled=false",
    )
    return p.parse_args()


# --- set-up -----------------------------------------------------------------------------------


def write_config(path: Path, lake: Path, pattern: str, args: argparse.Namespace) -> None:
    """The jobs' configuration: the demo's quality rules, processing-time, the bench topics."""
    demo = (ROOT / "pipelines" / "demo" / "demo.toml").read_text()
    rules = demo[demo.index("[[quality.expectations]]") : demo.index("[spark.conf]")]
    path.write_text(
        f"""[lakehouse]
path = "{lake}"
[kafka]
bootstrap_servers = "{BOOTSTRAP}"
topic_pattern = '{pattern}'
starting_offsets = "earliest"
max_offsets_per_trigger = {args.max_offsets_per_trigger}
[registry]
url = "{REGISTRY}"
[bronze]
table_mode = "{args.table_mode}"
trigger = "processing-time"
processing_interval = "{args.trigger}"
[silver]
trigger = "processing-time"
processing_interval = "{args.trigger}"
table_discovery_seconds = 1.0
{rules}
[spark.conf]
"spark.sql.shuffle.partitions" = "{args.shuffle_partitions}"
{spark_settings(args.conf)}"""
    )


def spark_settings(pairs: list[str]) -> str:
    """``KEY=VALUE`` pairs as TOML lines of ``[spark.conf]``."""
    lines = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--conf wants KEY=VALUE, got {pair!r}")
        if key.strip() == "spark.sql.shuffle.partitions":
            raise SystemExit("--conf: set spark.sql.shuffle.partitions with --shuffle-partitions")
        lines.append(f"{json.dumps(key.strip())} = {json.dumps(value.strip())}\n")
    return "".join(lines)


def generate(prefix: str, records: int) -> list[Any]:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from pipelines.demo.generate import DemoStream

    client = SchemaRegistryClient.new_client({"url": REGISTRY})
    return list(DemoStream(client, topic_prefix=prefix, records=records, poison_every=50))


def start_job(job: str, config: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    cmd = [sys.executable, "-m", "pipelines.cli", job, "--config", str(config), "--json"]
    cmd += ["--trigger", "processing-time"]
    out = log.open("wb")
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_started(log: Path, proc: subprocess.Popen[bytes], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} ended early (exit {proc.returncode}); see {log}")
        if what in log.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what!r} in {log}")


# --- producing --------------------------------------------------------------------------------


@dataclass
class Production:
    """What the producer did: records sent, and how far behind its schedule it fell."""

    sent: int = 0
    behind_seconds: list[float] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0


def produce(records: list[Any], rate: int, out: Production, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 5, "acks": "all"})
    out.started = time.time()
    t0 = time.monotonic()
    i = 0
    while i < len(records) and not stop.is_set():
        due = min(len(records), int((time.monotonic() - t0) * rate) + 1)
        while i < due:
            r = records[i]
            try:
                producer.produce(r.topic, value=r.value, key=r.key, headers=r.headers or None)
            except BufferError:
                producer.poll(0.05)
                continue
            i += 1
        out.behind_seconds.append(max(0.0, (time.monotonic() - t0) - i / rate))
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(60)
    out.sent = i
    out.ended = time.time()


# --- polling silver ---------------------------------------------------------------------------


class SilverPoller:
    """Reads each new commit of the silver tables: its time and its rows' Kafka timestamps."""

    def __init__(self, silver: Path) -> None:
        self.silver = silver
        self.versions: dict[Path, int] = {}
        self.newest_ms = 0  # newest Kafka timestamp visible in silver, ms since the epoch
        self.latencies: list[tuple[float, float]] = []  # (kafka ts s, commit - kafka ts s)
        self.rows = 0
        self.topics_seen: dict[str, float] = {}  # topic -> first commit with its rows (s)

    def poll(self) -> None:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        if not self.silver.is_dir():
            return
        for table in sorted(p for p in self.silver.iterdir() if (p / "_delta_log").is_dir()):
            version = self.versions.get(table, -1) + 1
            while (log := table / "_delta_log" / f"{version:020d}.json").exists():
                commit_ms, files = _read_commit(log)
                if commit_ms is None:
                    break  # being written: next poll
                for name in files:
                    data = pq.read_table(table / name, columns=["_kafka_timestamp", "_kafka_topic"])
                    for topic in pc.unique(data.column("_kafka_topic")).drop_null().to_pylist():
                        self.topics_seen.setdefault(topic, commit_ms / 1000)
                    column = data.column("_kafka_timestamp")
                    stamps = [t.timestamp() for t in column.to_pylist() if t is not None]
                    self.rows += len(stamps)
                    for ts in stamps:
                        self.latencies.append((ts, commit_ms / 1000 - ts))
                    if stamps:
                        self.newest_ms = max(self.newest_ms, int(max(stamps) * 1000))
                self.versions[table] = version
                version += 1


def _read_commit(log: Path) -> tuple[int | None, list[str]]:
    """A Delta commit file's commitInfo timestamp and the data files it added."""
    from urllib.parse import unquote

    try:
        actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    except ValueError:
        return None, []
    commit = next((a["commitInfo"] for a in actions if "commitInfo" in a), None)
    files = [unquote(a["add"]["path"]) for a in actions if "add" in a]
    return (int(commit["timestamp"]) if commit else None), files


# --- batches from the jobs' metrics lines -----------------------------------------------------


def batches(log: Path) -> list[dict[str, Any]]:
    """The ``{"event": "batch", ...}`` metrics lines of a job's ``--json`` log."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        start = line.find('{"')
        if start < 0 or '"event": "batch"' not in line:
            continue
        try:
            out.append(json.loads(line[start:]))
        except ValueError:
            continue
    return out


# --- figures ----------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def line(label: str, values: list[float], target: float | None = None, unit: str = "s") -> str:
    if not values:
        return f"  {label:<44} (no samples)"
    p50, p95 = pct(values, 0.5), pct(values, 0.95)
    text = f"  {label:<44} p50 {p50:7.2f} {unit}  p95 {p95:7.2f} {unit}  (n={len(values)})"
    if target is not None:
        text += f"   target {target:g} {unit}: {p50 / target:.2f}x"
    return text


def main() -> int:
    args = parse_args()
    from pipelines.demo.produce import check_stack
    from pipelines.settings import load_config

    work = Path(tempfile.mkdtemp(prefix="protolake-freshness-"))
    prefix = f"bench.fresh.{uuid.uuid4().hex[:8]}."
    lake, config = work / "lake", work / "bench.toml"
    write_config(config, lake, re.escape(prefix) + ".*", args)
    problems = check_stack(load_config(config))
    if problems:
        print(f"freshness_bench: {'; '.join(problems)}; run infra/stack.sh up", file=sys.stderr)
        return 1
    total = args.rate * (args.warmup + args.seconds)
    t = time.monotonic()
    records = generate(prefix, total)
    well_formed = sum(1 for r in records if r.message_type is not None)
    print(
        f"freshness: {total} demo records ({well_formed} well-formed) generated in "
        f"{time.monotonic() - t:.1f} s; {args.rate}/s for {args.warmup} + {args.seconds} s; "
        f"trigger {args.trigger}; bronze tables {args.table_mode}; work folder {work}",
        flush=True,
    )
    from pipelines.demo.produce import ensure_topics

    ensure_topics(BOOTSTRAP, sorted({r.topic for r in records}))
    silver_log, bronze_log = work / "silver.log", work / "bronze.log"
    silver_proc = start_job("silver", config, silver_log)
    bronze_proc: subprocess.Popen[bytes] | None = None
    poller = SilverPoller(lake / "silver")
    fresh: list[tuple[float, float | None]] = []  # (poll time, now - newest visible or None)
    production = Production()
    stop = threading.Event()
    try:
        wait_started(silver_log, silver_proc, "waiting for new tables", 300)
        bronze_proc = start_job("bronze", config, bronze_log)
        wait_started(bronze_log, bronze_proc, '"event": "started"', 300)
        producer = threading.Thread(target=produce, args=(records, args.rate, production, stop))
        producer.start()
        while producer.is_alive():
            poller.poll()
            now = time.time()
            fresh.append((now, now - poller.newest_ms / 1000 if poller.newest_ms else None))
            time.sleep(args.poll)
        drain_until = time.monotonic() + args.drain
        while poller.rows < well_formed and time.monotonic() < drain_until:
            time.sleep(args.poll)
            poller.poll()
    finally:
        stop.set()
        for proc in (bronze_proc, silver_proc):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in (bronze_proc, silver_proc):
            if proc is not None:
                try:
                    proc.wait(120)
                except subprocess.TimeoutExpired:
                    proc.kill()
    topics = {r.topic for r in records if r.message_type is not None}
    window_start = measured_from(args, production, poller, topics)
    window_end = production.ended
    report(args, production, poller, fresh, window_start, window_end, well_formed, work)
    print_batches(bronze_log, silver_log)
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


def measured_from(
    args: argparse.Namespace, production: Production, poller: SilverPoller, topics: set[str]
) -> float:
    """The measured window's start, said with silver's start-up: the later of the warm-up's
    end and the start-up, or the warm-up's end when silver showed every topic only after the
    last record (or never)."""
    started_up = start_up_end(poller, topics)
    print_start_up(production, poller, topics, started_up)
    window_start = production.started + args.warmup
    if started_up is not None and started_up < production.ended:
        return max(window_start, started_up)
    print("silver showed every topic only after the last record was produced (or never):")
    print("  the window below starts at the warm-up's end and includes silver's start-up")
    return window_start


def start_up_end(poller: SilverPoller, topics: set[str]) -> float | None:
    """When silver had started up: its first commit with rows of every topic (None: never)."""
    if not topics <= set(poller.topics_seen):
        return None
    return max(poller.topics_seen[t] for t in topics)


def print_start_up(
    production: Production, poller: SilverPoller, topics: set[str], started_up: float | None
) -> None:
    """Silver's start-up, apart from the measured window: from the first record produced to
    the first silver commit with rows of each topic (both jobs start cold, before it)."""
    seen = sorted(t - production.started for t in poller.topics_seen.values())
    if not seen:
        print("start-up: no silver row visible")
        return
    every = "not within the run"
    if started_up is not None:
        every = f"{started_up - production.started:.1f} s"
    print(
        f"start-up: silver's first rows {seen[0]:.1f} s after the first record was produced; "
        f"rows of every topic ({len(topics)}): {every}"
    )


def report(
    args: argparse.Namespace,
    production: Production,
    poller: SilverPoller,
    fresh: list[tuple[float, float | None]],
    window_start: float,
    window_end: float,
    well_formed: int,
    work: Path,
) -> None:
    behind = pct(production.behind_seconds, 0.95)
    print(
        f"producer: sent {production.sent} records in {production.ended - production.started:.1f} s"
        f" (asked {args.rate}/s; p95 behind schedule {behind:.2f} s)"
    )
    if behind > 1.0:
        print("  WARNING: the producer could not keep the rate; the figures below understate lag")
    print(
        f"silver: {poller.rows} of {well_formed} well-formed records visible at the end "
        f"(after a drain of up to {args.drain} s; DQ_FAILED rows go to quarantine)"
    )
    polls = [lag for at, lag in fresh if window_start <= at <= window_end]
    samples = [lag for lag in polls if lag is not None]
    if len(samples) < len(polls):
        print(
            f"  {len(polls) - len(samples)} of {len(polls)} polls in the window found no record "
            "in silver yet (not counted below: freshness then exceeds the time since the start)"
        )
    per_record = [lat for ts, lat in poller.latencies if window_start <= ts <= window_end]
    print(
        f"measured window: {window_end - window_start:.0f} s, from "
        f"{window_start - production.started:.1f} s after the first record to the last one"
    )
    print(line("freshness (now - newest Kafka ts in silver)", samples, TARGETS["freshness_p50"]))
    if samples:
        print(
            f"  {'':<44} p95 target {TARGETS['freshness_p95']:g} s: "
            f"{pct(samples, 0.95) / TARGETS['freshness_p95']:.2f}x"
        )
    print(line("per record: silver commit - Kafka ts", per_record))
    print_slices([(at, lag) for at, lag in fresh if window_start <= at <= window_end], window_start)
    if args.keep:
        print(f"kept: {work}")


def print_slices(
    polls: list[tuple[float, float | None]], start: float, width: float = 20.0
) -> None:
    """Freshness through the window, slice by slice (its p50 and largest value in each
    ``width`` seconds): whether silver works off a backlog, keeps up or falls behind."""
    slices: dict[int, list[float]] = {}
    for at, lag in polls:
        if lag is not None:
            slices.setdefault(int((at - start) // width), []).append(lag)
    if not slices:
        return
    cells = [
        f"{k * width:.0f}-{(k + 1) * width:.0f} s: {pct(v, 0.5):.1f}/{max(v):.1f}"
        for k, v in sorted(slices.items())
    ]
    print(f"  freshness by {width:.0f} s of the window (p50/max s): " + ", ".join(cells))


def print_batches(bronze_log: Path, silver_log: Path) -> None:
    bronze_b = [b for b in batches(bronze_log) if b.get("records_in")]
    silver_b = [b for b in batches(silver_log) if b.get("records_in")]
    print(
        line(
            "bronze micro-batch duration",
            [b["duration_seconds"] for b in bronze_b],
            TARGETS["bronze_batch"],
        )
    )
    print(line("bronze records per batch", [b["records_in"] for b in bronze_b], unit="rec"))
    print(line("silver micro-batch duration", [b["duration_seconds"] for b in silver_b]))
    print(line("silver records per batch", [b["records_in"] for b in silver_b], unit="rec"))
    near_500 = [b["duration_seconds"] for b in silver_b if 300 <= b["records_in"] <= 800]
    print(line("silver batch of 300-800 records", near_500, TARGETS["silver_batch_500"]))
    per_query: dict[str, list[float]] = {}
    for b in silver_b:
        per_query.setdefault(b["query"], []).append(b["duration_seconds"])
    for query, values in sorted(per_query.items()):
        print(f"    {query:<50} batches {len(values):4d}  p50 {statistics.median(values):.2f} s")
    first_id = {q: min(b["batch_id"] for b in silver_b if b["query"] == q) for q in per_query}
    first = [b for b in silver_b if b["batch_id"] == first_id[b["query"]]]
    print_split("silver, first batch of each query", first)
    print_split("silver, later batches", [b for b in silver_b if b not in first])


def print_split(label: str, silver_b: list[dict[str, Any]]) -> None:
    """Where silver batches' time went: Spark's phases, and the steps of the foreachBatch
    (``addBatch``), as p50 over the batches that have each (a batch without records ends
    after its first step)."""
    if not silver_b:
        return
    print(f"  {label}: p50 seconds by phase and step (n={len(silver_b)})")
    for key in ("phases_seconds", "steps_seconds"):
        found: dict[str, list[float]] = {}
        for b in silver_b:
            for name, seconds in (b.get(key) or {}).items():
                found.setdefault(name, []).append(seconds)
        parts = [f"{n} {statistics.median(v):.2f}" for n, v in found.items()]
        print(f"    {key.split('_')[0]:<7} " + ", ".join(parts))


if __name__ == "__main__":
    sys.exit(main())
