"""Micro-benchmark of pipelines.proto_types: RowConverter.to_record_batch against the obvious
baseline, json_format.MessageToDict + pa.RecordBatch.from_pylist, on the same messages.

The message is a realistic order: a dozen fields, nested structs, a repeated struct, a map,
a timestamp, an enum, a proto3 optional, a uint64. Messages are decoded once up front; both
sides convert the same list in batches of --batch (mapInArrow's default is 10,000 records).
Time is this process's CPU time (time.process_time), not wall time: the machine is shared
with other jobs, and CPU time is what a busy executor core spends. Prints rows/s of each and
the ratios; not a test, nothing is asserted.

    .venv/bin/python bench/proto_types_bench.py [--records 100000] [--batch 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import Message

from codec.protoc import run_protoc
from pipelines.proto_types import RowConverter

ORDER_PROTO = """
syntax = "proto3";
package bench.v1;
import "google/protobuf/timestamp.proto";

message Order {
  enum Status { STATUS_UNSPECIFIED = 0; PLACED = 1; PAID = 2; SHIPPED = 3; }
  message LineItem { string sku = 1; int32 quantity = 2; double unit_price = 3; }
  message Address { string street = 1; string city = 2; string country = 3; string postcode = 4; }

  string order_id = 1;
  int64 customer_id = 2;
  google.protobuf.Timestamp created_at = 3;
  Status status = 4;
  double total = 5;
  string currency = 6;
  repeated LineItem items = 7;
  Address shipping = 8;
  map<string, string> tags = 9;
  optional string coupon = 10;
  bool gift = 11;
  uint64 checksum = 12;
}
"""


def order_class() -> type[Message]:
    """Compile ORDER_PROTO with protoc and return the message class."""
    raw = run_protoc({"order.proto": ORDER_PROTO}, ["order.proto"], source_info=False)
    fds = descriptor_pb2.FileDescriptorSet.FromString(raw)
    pool = descriptor_pool.DescriptorPool()
    for file in fds.file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.v1.Order"))


def make_payloads(cls: type[Message], count: int) -> list[bytes]:
    rng = random.Random(42)
    payloads = []
    for i in range(count):
        msg = cls(
            order_id=f"order-{i:08d}",
            customer_id=rng.randrange(1, 10**12),
            status=rng.randrange(0, 4),
            total=round(rng.uniform(1, 500), 2),
            currency=rng.choice(["EUR", "USD", "GBP"]),
            gift=rng.random() < 0.1,
            checksum=rng.randrange(0, 2**64),
        )
        msg.created_at.seconds = 1_700_000_000 + i
        msg.created_at.nanos = rng.randrange(0, 10**9)
        for n in range(rng.randrange(1, 5)):
            msg.items.add(
                sku=f"sku-{n}-{rng.randrange(1000)}",
                quantity=rng.randrange(1, 9),
                unit_price=round(rng.uniform(1, 100), 2),
            )
        if rng.random() < 0.9:
            msg.shipping.street = f"{rng.randrange(1, 300)} Main Street"
            msg.shipping.city = rng.choice(["Lyon", "Porto", "Leeds"])
            msg.shipping.country = rng.choice(["FR", "PT", "GB"])
            msg.shipping.postcode = f"{rng.randrange(10000, 99999)}"
        for key in rng.sample(["channel", "campaign", "device"], rng.randrange(0, 3)):
            msg.tags[key] = f"v{rng.randrange(100)}"
        if rng.random() < 0.3:
            msg.coupon = f"C{rng.randrange(1000)}"
        payloads.append(msg.SerializeToString())
    return payloads


def baseline(messages: list[Message]) -> pa.RecordBatch:
    rows = [json_format.MessageToDict(m, preserving_proto_field_name=True) for m in messages]
    return pa.RecordBatch.from_pylist(rows)


def measure(
    convert: Callable[[list[Message]], pa.RecordBatch],
    cls: type[Message],
    payloads: list[bytes],
    batch: int,
) -> tuple[float, float]:
    """CPU seconds spent decoding and converting ``payloads``, chunk by chunk.

    As an executor does inside mapInArrow: decode one chunk of payloads into fresh messages,
    convert them, drop them, next chunk. Fresh messages matter: upb creates the Python
    objects of sub-messages on first access, so converting the same messages twice would
    flatter the second round.
    """
    decoding = converting = 0.0
    for i in range(0, len(payloads), batch):
        start = time.process_time()
        messages = [cls.FromString(p) for p in payloads[i : i + batch]]
        decoded = time.process_time()
        convert(messages)
        converting += time.process_time() - decoded
        decoding += decoded - start
        del messages
    return decoding, converting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    cls = order_class()
    payloads = make_payloads(cls, args.records)
    start = time.process_time()
    converter = RowConverter(cls.DESCRIPTOR)
    build_ms = (time.process_time() - start) * 1000

    # Interleaved rounds, so both sides see the same machine load (other jobs may run);
    # the best round of each counts.
    ours: tuple[float, float] = (float("inf"), float("inf"))
    theirs: tuple[float, float] = (float("inf"), float("inf"))
    for _ in range(args.repeat):
        ours = min(ours, measure(converter.to_record_batch, cls, payloads, args.batch), key=sum)
        theirs = min(theirs, measure(baseline, cls, payloads, args.batch), key=sum)

    n = len(payloads)
    print(f"records: {n:,}, batch: {args.batch:,}, best of {args.repeat} rounds")
    print(f"RowConverter built in {build_ms:.1f} ms")
    print(f"{'rows/s':>42} {'convert':>12} {'decode+convert':>15}")
    print(f"{'RowConverter.to_record_batch':>42} {n / ours[1]:12,.0f} {n / sum(ours):15,.0f}")
    print(
        f"{'MessageToDict + RecordBatch.from_pylist':>42} "
        f"{n / theirs[1]:12,.0f} {n / sum(theirs):15,.0f}"
    )
    print(
        f"ratio convert: {theirs[1] / ours[1]:.1f}x, decode+convert: {sum(theirs) / sum(ours):.1f}x"
    )


if __name__ == "__main__":
    main()
