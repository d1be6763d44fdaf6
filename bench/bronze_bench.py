"""Bronze ingest throughput and memory against a plain Spark Kafka-to-Delta stream, one run.

    .venv/bin/python bench/bronze_bench.py [--records 300000] [--value-bytes 300]

Needs the local broker (``infra/stack.sh up``; PROTOLAKE_KAFKA_BOOTSTRAP). It produces N
records of about ``--value-bytes`` to a fresh topic (and 2N to another), then runs, each in
its own ``spark-submit --master local[2]`` (a fresh JVM, the same jars and settings):

- plain:  ``readStream.format("kafka") -> writeStream.format("delta")``, available-now, nothing
  else (the baseline);
- bronze: ``pipelines.bronze.run`` on the same topic (``kafka.topics = [topic]``, per-topic mode,
  headers, ingest columns, partitioned by ``_ingest_date``);
- bronze-routed: the same through the general per-topic router (``topic_pattern``), which
  keeps each batch on local disk and lists its topics first.

Each job times its streaming query (start to end, JVM start-up excluded) and counts the rows
it wrote (they must equal N). Plain and bronze alternate, twice each; the median counts.
Memory: the spark-submit process tree is sampled every 0.1 s (psutil): peak RSS of the JVM
(driver and executor are one JVM in local mode) and of the Python driver, plus the JVM's
own peak heap use (JMX), for N and 2N records. Figures are printed; ratios are computed
against the baseline of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

RESULT_TAG = "BENCH_RESULT "
BOOTSTRAP = os.environ.get("PROTOLAKE_KAFKA_BOOTSTRAP", "127.0.0.1:9092")


# --- inside spark-submit --------------------------------------------------------------------


def run_job(kind: str, topic: str, lake: str, bootstrap: str) -> dict[str, Any]:
    from pipelines import bronze
    from pipelines.settings import parse_config
    from pipelines.spark import build_session

    spark = build_session(f"bronze-bench-{kind}")
    if kind == "plain":
        path = f"{lake}/plain"
        source = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
        )
        t0 = time.monotonic()
        query = (
            source.writeStream.format("delta")
            .option("checkpointLocation", f"{lake}/_checkpoints/plain")
            .trigger(availableNow=True)
            .start(path)
        )
        query.awaitTermination()
        seconds = time.monotonic() - t0
    else:
        kafka: dict[str, Any] = {"bootstrap_servers": bootstrap}
        if kind == "bronze":
            kafka["topics"] = [topic]
        else:  # bronze-routed
            kafka["topic_pattern"] = re.escape(topic)
        cfg = parse_config({"lakehouse": {"path": lake}, "kafka": kafka})
        t0 = time.monotonic()
        bronze.run(cfg, trigger="available-now", spark=spark)
        seconds = time.monotonic() - t0
        path = bronze.bronze_table_path(cfg, bronze.bronze_table_for(cfg, topic))
    rows = spark.read.format("delta").load(path).count()
    return {"kind": kind, "seconds": seconds, "rows": rows, **jvm_heap(spark)}


def jvm_heap(spark: Any) -> dict[str, float]:
    """Peak heap use over the JVM's life (JMX), and what the last GCs left live."""
    jvm = spark.sparkContext._jvm
    mf = jvm.java.lang.management.ManagementFactory
    peak = live = 0
    for pool in mf.getMemoryPoolMXBeans():
        if str(pool.getType().toString()) != "Heap memory":
            continue
        peak += pool.getPeakUsage().getUsed()
        after_gc = pool.getCollectionUsage()
        if after_gc is not None:
            live += after_gc.getUsed()
    heap_max = mf.getMemoryMXBean().getHeapMemoryUsage().getMax()
    mib = 1024 * 1024
    return {
        "heap_peak_mib": peak / mib,
        "heap_after_gc_mib": live / mib,
        "heap_max_mib": heap_max / mib,
    }


# --- the orchestrating process --------------------------------------------------------------


def produce(topic: str, records: int, value_bytes: int, partitions: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=30)
    producer = Producer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
        }
    )
    payload = (os.urandom(value_bytes).hex().encode())[:value_bytes]
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for i in range(records):
        key = None if i % 10 == 0 else b"k%d" % i
        while True:
            try:
                producer.produce(topic, value=payload, key=key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) or failures:
        raise SystemExit(f"producing to {topic} failed: {failures[:3]}")


class TreeSampler(threading.Thread):
    """Samples the RSS of a process tree: peak of the JVM and of the Python processes."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.done = threading.Event()
        self.peak_java = self.peak_python = 0

    def run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self.done.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            java = python = 0
            for proc in procs:
                try:
                    name, rss = proc.name(), proc.memory_info().rss
                except psutil.Error:
                    continue
                if name == "java":
                    java += rss
                elif name.startswith("python"):
                    python += rss
            self.peak_java = max(self.peak_java, java)
            self.peak_python = max(self.peak_python, python)
            self.done.wait(self.interval)


def submit(kind: str, topic: str, records: int, workdir: Path) -> dict[str, Any]:
    from pipelines.jobs import build_py_files, spark_submit_path
    from pipelines.spark import find_spark_jars, local_conf

    lake = workdir / f"{kind}-{uuid.uuid4().hex[:6]}"
    conf = {
        **local_conf(),
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    cmd = [spark_submit_path(), "--master", "local[2]", "--jars", ",".join(find_spark_jars())]
    cmd += ["--py-files", build_py_files()]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += [str(Path(__file__).resolve()), "--job", kind, "--topic", topic, "--lake", str(lake)]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    log = workdir / f"{lake.name}.log"
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        out, _ = proc.communicate(timeout=3600)
        sampler.done.set()
        sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{kind} job failed ({proc.returncode}); log: {log}")
    line = next(x for x in out.splitlines() if x.startswith(RESULT_TAG))
    result: dict[str, Any] = json.loads(line[len(RESULT_TAG) :])
    if result["rows"] != records:
        raise SystemExit(f"{kind} wrote {result['rows']} rows, expected {records}; log: {log}")
    mib = 1024 * 1024
    result.update(
        records=records,
        records_per_s=records / result["seconds"],
        jvm_rss_peak_mib=sampler.peak_java / mib,
        python_rss_peak_mib=sampler.peak_python / mib,
    )
    print(
        f"  {kind:<14} {records:>8} records {result['seconds']:7.2f} s "
        f"{result['records_per_s']:>9.0f} rec/s  JVM RSS {result['jvm_rss_peak_mib']:6.0f} MiB  "
        f"heap peak {result['heap_peak_mib']:6.0f} MiB (after GC {result['heap_after_gc_mib']:5.0f})"
        f"  Python {result['python_rss_peak_mib']:4.0f} MiB",
        flush=True,
    )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--value-bytes", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2, help="plain/bronze pairs at N")
    parser.add_argument(
        "--job", choices=("plain", "bronze", "bronze-routed"), help=argparse.SUPPRESS
    )
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--lake", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        result = run_job(args.job, args.topic, args.lake, BOOTSTRAP)
        print(RESULT_TAG + json.dumps(result), flush=True)
        return 0

    n = args.records
    tag = uuid.uuid4().hex[:8]
    topic_n, topic_2n = f"bench.bronze.{tag}.n", f"bench.bronze.{tag}.2n"
    print(f"bronze bench: producing {n} + {2 * n} records of {args.value_bytes} bytes", flush=True)
    t0 = time.monotonic()
    produce(topic_n, n, args.value_bytes, args.partitions)
    produce(topic_2n, 2 * n, args.value_bytes, args.partitions)
    print(f"  produced in {time.monotonic() - t0:.1f} s", flush=True)

    with tempfile.TemporaryDirectory(prefix="bronze-bench-") as tmp:
        work = Path(tmp)
        runs: dict[str, list[dict[str, Any]]] = {"plain": [], "bronze": []}
        for _ in range(args.repeat):
            for kind in ("plain", "bronze"):
                runs[kind].append(submit(kind, topic_n, n, work))
        routed = submit("bronze-routed", topic_n, n, work)
        plain_2n = submit("plain", topic_2n, 2 * n, work)
        bronze_2n = submit("bronze", topic_2n, 2 * n, work)

    plain = statistics.median(r["records_per_s"] for r in runs["plain"])
    ours = statistics.median(r["records_per_s"] for r in runs["bronze"])
    bronze_n = max(runs["bronze"], key=lambda r: r["jvm_rss_peak_mib"])
    print("\nbronze bench results (median of runs; JVM start-up excluded)")
    print(f"  plain Kafka->Delta     {plain:10.0f} records/s")
    print(
        f"  protolake bronze       {ours:10.0f} records/s   ratio {ours / plain:.2f}x (aim >= 0.90x)"
    )
    print(
        f"  bronze, routed path    {routed['records_per_s']:10.0f} records/s   "
        f"ratio {routed['records_per_s'] / plain:.2f}x"
    )
    print("  peak memory, bronze (driver + executor JVM; Python driver):")
    for label, r in ((f"N={n}", bronze_n), (f"2N={2 * n}", bronze_2n)):
        print(
            f"    {label:<12} JVM RSS {r['jvm_rss_peak_mib']:6.0f} MiB  heap peak "
            f"{r['heap_peak_mib']:6.0f} MiB of {r['heap_max_mib']:.0f}  live after GC "
            f"{r['heap_after_gc_mib']:5.0f} MiB  Python {r['python_rss_peak_mib']:4.0f} MiB"
        )
    print(
        f"    2N/N: JVM RSS {bronze_2n['jvm_rss_peak_mib'] / bronze_n['jvm_rss_peak_mib']:.2f}x, "
        f"heap peak {bronze_2n['heap_peak_mib'] / bronze_n['heap_peak_mib']:.2f}x "
        f"(plain at 2N: JVM RSS {plain_2n['jvm_rss_peak_mib']:.0f} MiB, "
        f"heap peak {plain_2n['heap_peak_mib']:.0f} MiB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
