"""Benchmark: codec framing and full decode against confluent-kafka, on the same frames.

Frames come from confluent-kafka's real ProtobufSerializer (mock registry, offline). In one
run, best of several repeats, it prints frames/s for:

- framing: `codec.parse_frame` vs confluent-kafka's per-record framing step
  (`dual_schema_id_deserializer`, which its ProtobufDeserializer calls on every record);
- full decode: `codec.Decoder.decode` (strict, unknown-field check on; and keeping unknown
  fields) vs confluent-kafka's `ProtobufDeserializer` on the same frames;
- `codec.payload.decode_sliced` on batches of BATCH frames of one frame head (strict, and
  keeping unknown fields): the batch decode the silver job's upb path calls, per payload
  exactly what `decode_payload` gives;
- bare `FromString` of the payload alone (already sliced), same message class: the floor;
  and the same keeping every message of a batch alive, as a batch decode must, with the
  garbage collector paused (the dropping loop frees each message at once, so its memory
  stays in cache and the collector never runs);
- the floor of any batch decode through protobuf's Python API, framing and results aside:
  the payloads parsed in ~64 KiB wrapper chunks as `decode_sliced` parses them and every
  message handed out as a Python object; for strict decoding, plus the two upb calls an exact
  unknown-field test needs at the least (`DiscardUnknownFields`, which says nothing of what
  it dropped, and one `SerializeToString` to compare with the input). upb has no cheaper
  call that tells whether a parsed message holds unknown fields at any depth, so strict
  decoding cannot come nearer to a bare `FromString` than that floor.

and the ratios: framing speed-up (aim >= 3x), decode speed-up over confluent-kafka, and the
cost of full decode relative to bare FromString (aim <= 1.2x). Two payload sizes show how the
fixed per-record cost amortizes. Run: `.venv/bin/python bench/codec_bench.py`.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.schema_registry import (
    SchemaRegistryClient,
    dual_schema_id_deserializer,
)
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.schema_registry.serde import SchemaId
from confluent_kafka.serialization import MessageField, SerializationContext

from codec import (
    CodecError,
    Decoder,
    RegisteredSchema,
    SchemaReference,
    UnknownSchema,
    parse_frame,
)
from codec.gcpause import paused_gc
from codec.http_answers import detect_schema_format
from codec.payload import _batch_class, decode_sliced
from codec.protoc import generate_python
from codec.varint import write_uvarint64

N = 20_000
BATCH = 5_000  # records per decode_sliced call
REPEATS = 5
TOPIC = "bench-orders"

SCHEMA = """\
syntax = "proto3";
package benchshop;
import "google/protobuf/timestamp.proto";
message Order {
  string id = 1;
  string customer = 2;
  google.protobuf.Timestamp at = 3;
  map<string, string> attrs = 4;
  message Line { string sku = 1; int32 qty = 2; double price = 3; }
  repeated Line lines = 5;
  double total = 6;
  string note = 7;
}
"""


class MockAdapter:
    """The codec's SchemaRegistry protocol over confluent-kafka's mock registry client."""

    def __init__(self, client: SchemaRegistryClient) -> None:
        self.client = client

    @staticmethod
    def _convert(schema: Any) -> RegisteredSchema:
        text = schema.schema_str
        return RegisteredSchema(
            schema=text,
            schema_type=schema.schema_type or "AVRO",
            references=tuple(
                SchemaReference(r.name, r.subject, r.version) for r in schema.references or ()
            ),
            format="serialized" if detect_schema_format(text) == "serialized" else "text",
        )

    def get_schema_by_id(self, schema_id: int) -> RegisteredSchema:
        try:
            return self._convert(self.client.get_schema(schema_id))
        except Exception as exc:
            raise UnknownSchema(str(exc)) from None

    def get_schema_by_guid(self, schema_guid: str) -> RegisteredSchema:
        return self._convert(self.client.get_schema_by_guid(schema_guid))

    def get_version(self, subject: str, version: int) -> RegisteredSchema:
        return self._convert(self.client.get_version(subject, version).schema)

    def close(self) -> None:
        pass


def load_generated(tmp: Path) -> Any:
    (tmp / "benchshop").mkdir()
    (tmp / "benchshop/order.proto").write_text(SCHEMA)
    generate_python(tmp, ["benchshop/order.proto"], tmp)
    sys.path.insert(0, str(tmp))
    return importlib.import_module("benchshop.order_pb2")


def make_orders(pb: Any, lines: int) -> list[Any]:
    orders = []
    for i in range(N):
        order = pb.Order(id=f"order-{i:08d}", customer=f"customer-{i % 977}", total=12.5 * i)
        order.at.seconds = 1_700_000_000 + i
        if lines:
            order.note = "deliver to the back door, ring twice"
            order.attrs["channel"] = "web"
            order.attrs["campaign"] = f"c-{i % 13}"
            for j in range(lines):
                order.lines.add(sku=f"sku-{(i + j) % 5000:05d}", qty=j + 1, price=1.25 * (j + 1))
        orders.append(order)
    return orders


def best_rates(cases: dict[str, Callable[[], None]]) -> dict[str, float]:
    """Frames per second of each case (each handles N frames), best of REPEATS rounds.

    Rounds interleave the cases, so a machine that gets busier or quieter during the run
    shifts every case alike instead of skewing the ratios.
    """
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(REPEATS):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: N / seconds for name, seconds in best.items()}


def run_case(label: str, pb: Any, lines: int) -> None:
    client = SchemaRegistryClient.new_client({"url": "mock://"})
    serializer = ProtobufSerializer(pb.Order, client, {"auto.register.schemas": True})
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    frames = [serializer(order, ctx) for order in make_orders(pb, lines)]
    size = sum(map(len, frames)) / len(frames)

    decoder = Decoder(MockAdapter(client))
    keeping = Decoder(MockAdapter(client), allow_unknown_fields=True)
    first = decoder.decode(frames[0])
    cls = type(first.message)
    payloads = [f[first.frame.payload_offset :] for f in frames]
    deserializer = ProtobufDeserializer(pb.Order, {}, client)
    deserializer(frames[0], ctx)  # warm its schema cache, as ours is warmed by decode above
    # same message as confluent-kafka's (compared deterministically: map order may differ)
    ours_last = decoder.decode(frames[-1]).message.SerializeToString(deterministic=True)
    assert ours_last == deserializer(frames[-1], ctx).SerializeToString(deterministic=True)

    def ours_framing() -> None:
        for f in frames:
            parse_frame(f)

    def confluent_framing() -> None:
        for f in frames:
            dual_schema_id_deserializer(f, ctx, SchemaId("PROTOBUF"))

    def ours_decode() -> None:
        decode = decoder.decode
        for f in frames:
            decode(f)

    def ours_decode_keep() -> None:
        decode = keeping.decode
        for f in frames:
            decode(f)

    offset = parse_frame(frames[0]).payload_offset
    assert all(parse_frame(f).payload_offset == offset for f in frames)

    def sliced(keep_unknown: bool) -> Callable[[], None]:
        # `decode_sliced`: the payloads behind one frame head, a batch at a time (what the
        # silver job's upb path calls on the records of one schema key)
        def run() -> None:
            for start in range(0, N, BATCH):
                out, _ = decode_sliced(cls, frames[start : start + BATCH], offset, keep_unknown)
                assert not isinstance(out[-1], CodecError)

        return run

    def confluent_decode() -> None:
        for f in frames:
            deserializer(f, ctx)

    def bare() -> None:
        parse = cls.FromString
        for p in payloads:
            parse(p)

    def bare_kept() -> None:
        # what a batch decode must at least do: parse every payload and keep them all, with
        # the garbage collector paused (a floor without collections)
        parse = cls.FromString
        for start in range(0, N, BATCH):
            with paused_gc():
                kept = list(map(parse, payloads[start : start + BATCH]))
            assert len(kept) == len(payloads[start : start + BATCH])

    # the payloads as decode_sliced parses them: `repeated Order items = 1` wrappers of at most
    # 64 KiB, the same number of payloads in each, a batch of BATCH payloads at a time
    wrapper_class = _batch_class(cls)
    assert wrapper_class is not None
    per_chunk = max(1, 64 * 1024 * len(payloads) // sum(map(len, payloads)))
    items = [b"\x0a" + write_uvarint64(len(p)) + p for p in payloads]
    batches = [
        [
            b"".join(items[i : min(i + per_chunk, start + BATCH)])
            for i in range(start, min(start + BATCH, N), per_chunk)
        ]
        for start in range(0, N, BATCH)
    ]

    # What any batch decode through upb must do at the least, framing and results aside:
    # parse the wrappers and hand out every message as a Python object; strict decoding adds
    # the cheapest exact unknown-field test the Python API allows (discard, then one encode
    # compared with the input: equal means there were none).
    def wrapper_parse() -> None:
        for chunks in batches:
            with paused_gc():
                kept: list[Any] = []
                for c in chunks:
                    kept += wrapper_class.FromString(c).items
            assert kept

    def wrapper_check_floor() -> None:
        for chunks in batches:
            with paused_gc():
                kept: list[Any] = []
                for c in chunks:
                    wrapper = wrapper_class.FromString(c)
                    wrapper.DiscardUnknownFields()
                    # compared as decode_sliced's equality test compares (map entries may
                    # come back in another order: it then takes its slower size test)
                    canonical = wrapper.SerializeToString() == c
                    kept += wrapper.items
            assert kept and isinstance(canonical, bool)

    rates = best_rates(
        {
            "codec parse_frame": ours_framing,
            "confluent framing": confluent_framing,
            "codec decode (strict)": ours_decode,
            "codec decode (keep unknown)": ours_decode_keep,
            "codec decode_sliced (strict)": sliced(False),
            "codec decode_sliced (keep unknown)": sliced(True),
            "confluent ProtobufDeserializer": confluent_decode,
            "bare FromString(payload)": bare,
            "bare FromString, batch kept, no GC": bare_kept,
            "floor: wrapper parse, messages out": wrapper_parse,
            "floor: + discard + encode (strict)": wrapper_check_floor,
        }
    )
    print(f"-- {label}: {N} frames, {size:.0f} bytes/frame avg, best of {REPEATS}")
    for name, rate in rates.items():
        print(f"   {name:34s} {rate:>12,.0f} frames/s")
    print(
        f"   ratio framing codec/confluent          {rates['codec parse_frame'] / rates['confluent framing']:6.2f}x  (aim >= 3x)"
    )
    print(
        f"   ratio decode codec/confluent           {rates['codec decode (strict)'] / rates['confluent ProtobufDeserializer']:6.2f}x faster"
    )
    print(
        f"   cost decode(strict)/bare FromString    {rates['bare FromString(payload)'] / rates['codec decode (strict)']:6.2f}x  (aim <= 1.2x)"
    )
    print(
        f"   cost decode(keep)/bare FromString      {rates['bare FromString(payload)'] / rates['codec decode (keep unknown)']:6.2f}x"
    )
    bare = rates["bare FromString(payload)"]
    kept = rates["bare FromString, batch kept, no GC"]
    for mode in ("strict", "keep unknown"):
        many = rates[f"codec decode_sliced ({mode})"]
        print(
            f"   cost decode_sliced({mode})/bare FromString {bare / many:5.2f}x"
            f"  /bare kept {kept / many:5.2f}x  (aim <= 1.2x)"
        )
    floor_keep = rates["floor: wrapper parse, messages out"]
    floor_strict = rates["floor: + discard + encode (strict)"]
    print(
        f"   floor of a strict batch decode via upb/bare FromString {bare / floor_strict:5.2f}x"
        f"  (the check adds {floor_keep / floor_strict - 1:4.2f}x of the parse it checks)"
    )
    print(f"   floor of a keep-unknown batch decode/bare FromString  {bare / floor_keep:5.2f}x")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="codec-bench-") as tmp:
        pb = load_generated(Path(tmp))
        run_case("small order (no lines)", pb, 0)
        run_case("order with 20 lines", pb, 20)


if __name__ == "__main__":
    main()
