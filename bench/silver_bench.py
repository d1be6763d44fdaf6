"""Silver decode throughput against baselines measured in the same run (issue 4, "Speed").

    .venv/bin/python bench/silver_bench.py [--records 1000000] [--udf-records N] [--repeat 2]

Input: ``--records`` Confluent-framed records of a realistic message (``bench.v1.Order``: 14
fields, a nested message, repeated strings and messages, a map, an enum, a uint64 and a
Timestamp), framed by confluent-kafka's real ProtobufSerializer against the registry test
server (infra/registry_server/). 1,000 distinct messages are serialized once and repeated
by Spark (``range(N)`` joined to them), so every method reads the same in-memory input;
every method ends in Spark's ``noop`` sink, so no disk writes are timed.

Methods (records/s, best of ``--repeat`` runs on local[2]):

- silver: protolake's path as ``SilverBatch`` runs it by default: ``head_counts`` (the raw
  frame head of each record cut in the JVM, the distinct heads read on the driver) ->
  distinct schema keys -> one registry lookup per schema -> ``decode_version`` over the
  records of each key (their one pass through the Python workers: the compiled decoder of
  ``pipelines.proto_types._native`` straight from the Arrow buffers; the upb path for what it
  gives back).
  Each pass recomputes the input (here the range join; in the job, a re-read of the bronze
  Delta files).
- silver, cache_bronze = true: the same with the batch cached once for both passes.
- (a) Spark's ``from_protobuf`` over the bare payloads (framing stripped) with the binary
  descriptor set: only when the spark-protobuf jar is on the classpath. Maven Central as
  reachable here has no ``org.apache.spark:spark-protobuf_2.13`` at all (HTTP 404 for 4.2.0
  and for its maven-metadata.xml), so this run reports it as unavailable and measures a JVM
  stand-in: (a') Spark's built-in ``from_json`` over the same messages' canonical JSON into
  the typed schema (JVM decoding to typed columns; JSON text, not protobuf bytes).
- (b) a per-record Python UDF calling confluent-kafka's ``ProtobufDeserializer`` (what a user
  would write), returning the message as JSON text; on ``--udf-records`` records (default:
  as many as the others), best of ``--repeat`` runs like the others.
- silver, upb path only: the same with ``DecodeSpec.native=False`` (no compiled decoder:
  ``codec.decode_payloads`` + ``RowConverter`` for every record).
- input: the cost of producing the input rows alone (included in every method above).

Also printed: registry requests against distinct schemas, for N and 2N records; peak resident
memory of the Spark JVM and of its Python workers, for N and 2N records.

The session is a local master's as the jobs build it (``pipelines.spark.local_conf``): its
JVM runs the client compiler alone (``-XX:TieredStopAtLevel=1``), which keeps two cores free
for the streams but slows JVM-heavy work such as ``from_json`` more than protolake's decode.
So the bench then runs again with the optimising compiler too, as a cluster's JVMs run
(``bench/_jit.py``: a Spark conf folder naming the driver's JVM options, so ``local_conf``
adds none; ``--no-optimising-jit-too`` skips that run).
Before any timing, silver and ``from_json`` run once each: the JIT compiles the code every
method runs before the first method is timed, not within its runs. On 2 cores, over several
runs: silver 230-247k records/s and ``from_json`` 81-88k with the client compiler
alone (2.79-2.82x, two runs); 360-391k and 229-298k with the optimising one (1.24-1.65x, four
runs: ``from_json`` moves most). Silver with Spark's Arrow byte limit measured after every
record (``pipelines.silver.arrow_batches`` turns it off where the record limit ends every
Arrow batch first) was 1.00-1.25x slower with the client compiler and 1.01-1.19x with the
optimising one; over four runs of the decode pass alone, 1.94-2.16 s against 2.39-2.45 s.

Then, where silver's time goes (``bench/_decode_breakdown.py``: each part of the two passes
alone, ending in the ``noop`` sink). With the optimising compiler, 1M records, over three runs:
input 0.23-0.33 s, frame heads 0.30-0.38 s, framed records 0.27-0.33 s, the decode pass's Arrow
round trip without decoding 0.89-1.10 s, the decode pass 2.03-2.23 s; the decoder alone
0.91-0.98 us a record on one core (about 0.47 s on two). So everything but the decoding (the
pass less the framed records and the decoder: the rows to Arrow and back, the transfers and the
Python side's Arrow handling) is 1.2-1.5 s, more than the decoding; ``from_json`` is one pass
with no Arrow. In a JFR profile of the decode pass (optimising compiler, byte limit off), a
third of the executor threads' samples are the JVM turning the pass's Arrow output into rows
(``SpecificUnsafeProjection``), and a seventh Arrow's bounds checks on validity bytes; turning
those checks off (``-Darrow.enable_unsafe_memory_access=true``) made no difference beyond the
runs' spread. Keeping the lineage columns in the JVM (a scalar Arrow UDF given only the value
and its payload offset, its result put beside each row) does not pay either: the JVM then
queues every input row to join it back. The pass took 2.38 s that way against 2.42 s as it is
(3.73 against 3.89 s with the client compiler alone), best of four each, a difference within
the runs' spread, with 300 MB more JVM memory.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "infra"))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

PROTO = """
syntax = "proto3";
package bench.v1;
import "google/protobuf/timestamp.proto";

message Address {
  string street = 1;
  string city = 2;
  string postal_code = 3;
  string country = 4;
}

message Order {
  enum Status { STATUS_UNSPECIFIED = 0; PLACED = 1; PAID = 2; SHIPPED = 3; }
  message LineItem {
    string sku = 1;
    int32 quantity = 2;
    int64 unit_price_cents = 3;
  }
  string order_id = 1;
  string customer_id = 2;
  google.protobuf.Timestamp created_at = 3;
  Status status = 4;
  double total = 5;
  string currency = 6;
  int32 item_count = 7;
  uint64 loyalty_points = 8;
  bool gift = 9;
  repeated string tags = 10;
  map<string, string> attributes = 11;
  Address shipping_address = 12;
  repeated LineItem items = 13;
  int64 version = 14;
}
"""
DISTINCT = 1000
STAND_IN = "(a') from_json (JVM stand-in)"


def compile_proto() -> bytes:
    from codec.protoc import run_protoc

    return run_protoc({"bench/v1/order.proto": PROTO}, ["bench/v1/order.proto"], source_info=False)


def make_messages(fds: bytes) -> tuple[Any, list[Any]]:
    import datetime as dt

    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    for f in descriptor_pb2.FileDescriptorSet.FromString(fds).file:
        pool.Add(f)
    order_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.v1.Order"))
    msgs = []
    for i in range(DISTINCT):
        o = order_cls(
            order_id=f"ord-{i:08d}",
            customer_id=f"cust-{i % 997:06d}",
            status=1 + i % 3,
            total=12.5 + i,
            currency="EUR",
            item_count=1 + i % 4,
            loyalty_points=(2**64 - 1 - i) if i % 10 == 0 else i * 7,
            gift=i % 2 == 0,
            version=i,
        )
        o.created_at.FromDatetime(dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i))
        o.tags.extend([f"t{i % 5}", "promo"][: 1 + i % 2])
        o.attributes["channel"] = "web" if i % 2 else "app"
        o.attributes["campaign"] = f"c{i % 13}"
        a = o.shipping_address
        a.street, a.city, a.postal_code, a.country = (
            f"{i} Main St",
            "Lyon",
            f"{69000 + i % 10}",
            "FR",
        )
        for j in range(1 + i % 4):
            o.items.add(sku=f"sku-{(i + j) % 101}", quantity=1 + j, unit_price_cents=199 + 10 * j)
        msgs.append(o)
    return order_cls, msgs


class PeakRss:
    """Samples the resident memory of the Spark JVM and of its Python workers (summed), the
    processes descending from this driver."""

    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid  # this driver process: the JVM and the workers descend from it
        self.jvm_peak = 0
        self.workers_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _rss(pid: int) -> int:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except (FileNotFoundError, ProcessLookupError):
            pass
        return 0

    def _descendants(self, pid: int) -> list[int]:
        # A process's children are listed per thread (the JVM starts Python workers from
        # one of its many threads, not its main one): read every thread's list.
        out: list[int] = []
        children: list[str] = []
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                children += (task / "children").read_text().split()
            except OSError:
                continue
        for c in children:
            out.append(int(c))
            out.extend(self._descendants(int(c)))
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            jvm = workers = 0
            for pid in self._descendants(self.root_pid):
                try:
                    exe = Path(f"/proc/{pid}/exe").resolve().name
                except OSError:
                    continue
                if exe.startswith("java"):
                    jvm += self._rss(pid)
                elif exe.startswith("python"):
                    workers += self._rss(pid)
            self.jvm_peak = max(self.jvm_peak, jvm)
            self.workers_peak = max(self.workers_peak, workers)
            time.sleep(0.2)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument(
        "--udf-records", type=int, default=0, help="records for the UDF (default: --records)"
    )
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--optimising-jit-too",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="then run again with the JVM's optimising compiler (bench/_jit.py)",
    )
    args = parser.parse_args()

    import json

    from _decode_breakdown import best_of as timed
    from _decode_breakdown import print_breakdown
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import json_format
    from pyspark import StorageLevel
    from pyspark.sql import functions as F  # noqa: N812
    from registry_server import start_registry_server

    from codec import SchemaResolver, open_registry
    from lakehouse.bronze_columns import RECORD_COLUMNS
    from pipelines.silver.arrow_batches import MAX_BYTES, ArrowBatches
    from pipelines.silver.decode import DecodeSpec, decode_version
    from pipelines.silver.frame_heads import head_counts
    from pipelines.silver.framing import FramedBatch, Heads
    from pipelines.silver.resolution import resolve_schema_keys
    from pipelines.spark import build_session

    registry = start_registry_server(port=0)
    fds = compile_proto()
    order_cls, msgs = make_messages(fds)
    client = SchemaRegistryClient({"url": registry.url})
    ser = ProtobufSerializer(order_cls, client, {"use.deprecated.format": False})
    ctx = SerializationContext("bench.orders", MessageField.VALUE)
    frames = [ser(m, ctx) for m in msgs]
    jsons = [
        json.dumps(json_format.MessageToDict(m, preserving_proto_field_name=True)) for m in msgs
    ]
    from codec import parse_frame

    prefix_len = parse_frame(frames[0]).payload_offset  # 00 | id | [1] (Address comes first)
    assert all(parse_frame(f).payload_offset == prefix_len for f in frames)

    spark = build_session(
        "silver-bench",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "2g",
            "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
        },
    )
    jars = spark.conf.get("spark.jars", "") or ""
    small = spark.createDataFrame(
        [(i, f, f[prefix_len:], j) for i, (f, j) in enumerate(zip(frames, jsons, strict=True))],
        "fid long, value binary, payload binary, json string",
    ).cache()
    small.count()

    def bronze_input(n: int) -> Any:
        return (
            spark.range(n, numPartitions=4)
            .join(F.broadcast(small), F.col("id") % DISTINCT == F.col("fid"))
            .select(
                F.lit(None).cast("binary").alias("key"),
                "value",
                "payload",
                "json",
                F.lit("bench.orders").alias("topic"),
                F.lit(0).alias("partition"),
                F.col("id").alias("offset"),
                F.current_timestamp().alias("timestamp"),
                F.array().cast("array<struct<key:string,value:binary>>").alias("headers"),
            )
        )

    arrow_batches = ArrowBatches.for_session(spark)
    job_resolver = SchemaResolver(open_registry(registry.url))

    def run_silver(
        n: int,
        native: bool = True,
        cache: bool = False,
        byte_limit: bool = False,
        fresh_resolver: bool = False,
    ) -> tuple[int, int]:
        """protolake's executor path; returns (registry schema requests, distinct schemas).

        As ``SilverBatch`` does: the batch cached if ``cache`` (``silver.cache_bronze``, off
        by default), the frame heads pass (JVM only), the Arrow byte limit chosen by the
        largest record (``arrow_batches``), each distinct key resolved by the job's resolver
        (a registry lookup the first time: ``fresh_resolver`` makes one each run), one decode
        pass per key over its records.
        ``native=False``: without the compiled decoder (every record on the upb path).
        ``byte_limit``: with the launch's Arrow byte limit, which Spark measures after every
        record. The launch's limit is set back afterwards, for the methods timed next."""
        before = len([r for r in registry.requests if r[1].startswith("/schemas/")])
        resolver = SchemaResolver(open_registry(registry.url)) if fresh_resolver else job_resolver
        bronze = bronze_input(n)
        if cache:
            bronze = bronze.select(*RECORD_COLUMNS).persist(StorageLevel.MEMORY_AND_DISK)
        heads = Heads.of_rows(head_counts(bronze))
        # on this (the job's) session, what SilverBatch sets on each query's session
        chosen = arrow_batches.settings_for(None if byte_limit else heads.largest_record)
        spark.conf.set(MAX_BYTES, chosen[MAX_BYTES])
        assert not heads.python  # every bench frame is read from its head
        res = resolve_schema_keys(resolver, {v for v, _ in heads.counts if v})
        batch = FramedBatch(bronze, heads, lambda: heads.framed(bronze))
        for key, r in res.items():
            assert r.ok and r.file_descriptor_set is not None and r.message_type is not None, r
            spec = DecodeSpec(r.file_descriptor_set, r.message_type, 3, False, {}, native=native)
            decoded = decode_version(batch.records_of(key, with_keys=False), spec)
            decoded.write.format("noop").mode("overwrite").save()
        spark.conf.set(MAX_BYTES, str(arrow_batches.max_bytes))
        if cache:
            bronze.unpersist()
        after = len([r for r in registry.requests if r[1].startswith("/schemas/")])
        return after - before, len(res)

    n = args.records
    json_schema = spark.read.json(small.select("json").rdd.map(lambda r: r[0])).schema

    def run_from_json() -> None:
        bronze_input(n).select(F.from_json("json", json_schema).alias("m")).select(
            "m.*"
        ).write.format("noop").mode("overwrite").save()

    # once each, untimed: the JIT compiles the code every method runs (the input, Arrow, rows,
    # the sink) before any timing, not within the first method's runs
    run_silver(n)
    run_from_json()
    results: dict[str, float] = {}
    results["input only"] = n / timed(
        lambda: bronze_input(n).write.format("noop").mode("overwrite").save(), args.repeat
    )
    results["silver (protolake)"] = n / timed(lambda: run_silver(n), args.repeat)
    results["silver, cache_bronze = true"] = n / timed(
        lambda: run_silver(n, cache=True), args.repeat
    )
    results["silver, upb path only"] = n / timed(lambda: run_silver(n, False), args.repeat)
    results["silver, byte limit per record"] = n / timed(
        lambda: run_silver(n, byte_limit=True), args.repeat
    )

    if "spark-protobuf" in jars:
        from pyspark.sql.protobuf.functions import from_protobuf

        def run_from_protobuf() -> None:
            bronze_input(n).select(
                from_protobuf("payload", "bench.v1.Order", binaryDescriptorSet=fds).alias("m")
            ).select("m.*").write.format("noop").mode("overwrite").save()

        results["(a) from_protobuf"] = n / timed(run_from_protobuf, args.repeat)
    results[STAND_IN] = n / timed(run_from_json, args.repeat)

    url = registry.url

    @F.udf("string")
    def deserialize(value: bytes) -> str:
        from confluent_kafka.schema_registry import SchemaRegistryClient as Client
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
        from confluent_kafka.serialization import MessageField as Field
        from confluent_kafka.serialization import SerializationContext as Ctx

        global _DESER  # one deserializer per worker process, as a user would cache it
        try:
            d = _DESER  # type: ignore[name-defined]
        except NameError:
            from codec import message_class_for  # a user would import their generated _pb2

            cls = message_class_for(fds, "bench.v1.Order")
            d = _DESER = ProtobufDeserializer(
                cls, {"use.deprecated.format": False}, Client({"url": url})
            )
        msg = d(bytes(value), Ctx("bench.orders", Field.VALUE))
        return json_format.MessageToJson(msg, preserving_proto_field_name=True)

    m = args.udf_records or n
    results["(b) Python UDF, confluent-kafka"] = m / timed(
        lambda: (
            bronze_input(m)
            .select(deserialize("value").alias("j"))
            .write.format("noop")
            .mode("overwrite")
            .save()
        ),
        args.repeat,  # best of as many runs as silver's: the same warm-up for both
    )

    print(f"\nsilver decode, {n:,} records of bench.v1.Order on local[2] (UDF: {m:,} records)")
    for name, rate in results.items():
        print(f"  {name:34s} {rate:12,.0f} records/s")
    ours = results["silver (protolake)"]
    if "(a) from_protobuf" in results:
        print(
            f"  ratio silver / from_protobuf      {ours / results['(a) from_protobuf']:.2f}x (aim >= 0.8x)"
        )
    else:
        print(
            "  (a) from_protobuf: UNAVAILABLE (spark-protobuf_2.13 is not on Maven Central as reachable here)"
        )
    print(
        f"  ratio silver / from_json stand-in {ours / results[chr(40) + 'a' + chr(39) + ') from_json (JVM stand-in)']:.2f}x"
    )
    print(f"  ratio silver / upb path only      {ours / results['silver, upb path only']:.2f}x")
    print(
        f"  ratio silver / byte limit per rec {ours / results['silver, byte limit per record']:.2f}x"
    )
    print(
        f"  ratio silver / Python UDF         {ours / results['(b) Python UDF, confluent-kafka']:.1f}x (aim >= 10x)"
    )

    heads = Heads.of_rows(head_counts(bronze_input(n)))
    key, resolved = next(
        iter(
            resolve_schema_keys(
                SchemaResolver(open_registry(url)), {v for v, _ in heads.counts if v}
            ).items()
        )
    )
    assert resolved.file_descriptor_set is not None and resolved.message_type is not None
    spec = DecodeSpec(resolved.file_descriptor_set, resolved.message_type, 3, False, {})
    print(f"  Arrow byte limit, largest record {heads.largest_record} bytes: ", end="")
    print(arrow_batches.settings_for(heads.largest_record))
    spark.conf.set(MAX_BYTES, arrow_batches.settings_for(heads.largest_record)[MAX_BYTES])
    print_breakdown(
        lambda: bronze_input(n),
        lambda: Heads.of_rows(head_counts(bronze_input(n))),
        lambda: heads.records_of(bronze_input(n), None, key, False),
        spec,
        n,
        args.repeat,
    )

    for size in (n, 2 * n):
        with PeakRss(os.getpid()) as peak:
            requests, distinct = run_silver(size, fresh_resolver=True)
        print(
            f"  N={size:>10,}: registry schema requests {requests} for {distinct} distinct schema(s); "
            f"peak RSS JVM {peak.jvm_peak / 2**20:,.0f} MiB, Python workers {peak.workers_peak / 2**20:,.0f} MiB"
        )
    spark.stop()
    registry.stop()
    if not args.optimising_jit_too:
        return 0
    from _jit import OPTIMISING_JVM_OPTIONS, rerun_with_optimising_jit

    print(f"\n== the same, the driver's JVM options {OPTIMISING_JVM_OPTIONS!r} (both compilers)")
    sys.stdout.flush()
    return rerun_with_optimising_jit([__file__, *sys.argv[1:], "--no-optimising-jit-too"])


if __name__ == "__main__":
    sys.exit(main())
