"""Frames written by confluent-kafka's real ProtobufSerializer (mock registry) decode exactly.

Covers nested types (with the map<> trap), a schema with references, well-known types,
google/type, proto2 and proto3, prefix and header framing, and agreement with
confluent-kafka's own ProtobufDeserializer on the same frames.
"""

from __future__ import annotations

import pytest
from confluent_kafka.schema_registry.common.protobuf import _create_index_array
from google.protobuf import json_format

from codec import Decoder, SchemaResolver, UnknownMessage, parse_frame
from tests.support.codec_test_support import (
    ConfluentMockRegistry,
    compile_protos,
    confluent_decode,
    confluent_frame,
    import_generated,
    new_mock_client,
)

COMMON = """\
syntax = "proto3";
package cfx;
message Money { string currency = 1; int64 units = 2; int32 nanos = 3; }
enum Colour { COLOUR_UNSPECIFIED = 0; RED = 1; }
"""

NESTED = """\
syntax = "proto3";
package cfx;
import "cfx/common.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/any.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/duration.proto";
import "google/type/date.proto";

enum Top { TOP_UNSPECIFIED = 0; }  // enums are not counted by message indexes

message Envelope {
  string id = 1;
  map<string, int32> counts = 2;   // protoc makes CountsEntry, nested message 0
  message Inner {                  // so Inner is [0, 1]
    enum Kind { KIND_UNSPECIFIED = 0; BIG = 1; }
    Kind kind = 1;
    message Deep { string note = 1; }
    Deep deep = 2;
  }
  Inner inner = 3;
  cfx.Money total = 4;
  google.protobuf.Timestamp at = 5;
  cfx.Colour colour = 6;
  optional string maybe = 7;
  oneof pay { string card = 8; string iban = 9; }
}

message Known {
  message First {}
  google.protobuf.Any any = 1;
  google.protobuf.Struct meta = 2;
  google.protobuf.Int64Value big = 3;
  google.protobuf.Duration took = 4;
  google.type.Date day = 5;
  bytes blob = 6;
  repeated double xs = 7;
  map<string, cfx.Money> by = 8;
  message Last { int32 n = 1; }
}
"""

LEGACY = """\
syntax = "proto2";
package cfx;
message Legacy {
  required string name = 1;
  optional int32 n = 2 [default = 7];
  repeated int32 packed = 3 [packed = true];
  repeated int32 unpacked = 4;
  enum Kind { ONE = 1; TWO = 2; }
  optional Kind kind = 5;
  message Sub { optional string s = 1; }
  optional Sub sub = 6;
  extensions 100 to 200;
}
"""


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    out = tmp_path_factory.mktemp("cfx")
    compile_protos(
        {"cfx/common.proto": COMMON, "cfx/nested.proto": NESTED, "cfx/legacy.proto": LEGACY}, out
    )
    return import_generated("cfx/nested.proto"), import_generated("cfx/legacy.proto")


@pytest.fixture
def client():
    c = new_mock_client()
    yield c
    c.clear() if hasattr(c, "clear") else None


def samples(pb):
    nested, legacy = pb
    env = nested.Envelope(id="e-1", colour=1, card="4111", maybe="")
    env.counts["a"] = 3
    env.inner.kind = 1
    env.inner.deep.note = "deep"
    env.total.currency = "EUR"
    env.total.units = -12
    env.at.seconds = 1_700_000_000
    env.at.nanos = 5
    known = nested.Known(blob=b"\x00\xff", xs=[1.5, -2.0])
    known.any.Pack(nested.Envelope.Inner.Deep(note="packed"))
    known.meta.update({"k": "v", "n": 2, "list": [1, "x"]})
    known.big.value = 2**62
    known.took.seconds = 90
    known.day.year, known.day.month, known.day.day = 2026, 11, 22
    known.by["x"].units = 5
    leg = legacy.Legacy(name="old", packed=[1, 2, 300], unpacked=[4], kind=2)
    leg.sub.s = "s"
    return [
        env,
        env.inner,
        env.inner.deep,
        nested.Envelope(),  # all defaults: empty payload after the framing
        known,
        nested.Known.First(),
        nested.Known.Last(n=-1),
        leg,
        legacy.Legacy.Sub(s="x"),
    ]


def same(ours, theirs):
    """Equal messages (our classes live in their own pool, so compare the wire bytes)."""
    assert ours.DESCRIPTOR.full_name == theirs.DESCRIPTOR.full_name
    return ours.SerializeToString(deterministic=True) == theirs.SerializeToString(
        deterministic=True
    )


@pytest.mark.parametrize("header_form", [False, True], ids=["prefix", "header"])
def test_confluent_frames_decode_to_the_same_message(pb, client, header_form):
    registry = ConfluentMockRegistry(client)
    decoder = Decoder(registry)
    for message in samples(pb):
        topic = "t-" + message.DESCRIPTOR.full_name
        value, headers = confluent_frame(client, message, topic, header_form=header_form)
        record = decoder.decode(value, headers)
        expected_indexes = tuple(_create_index_array(message.DESCRIPTOR))
        assert record.message_type == message.DESCRIPTOR.full_name
        assert record.message_indexes == expected_indexes
        assert record.frame.source == ("header" if header_form else "prefix")
        assert (record.schema_guid is not None) == header_form
        assert record.message.SerializeToString(deterministic=True) == message.SerializeToString(
            deterministic=True
        )
        assert record.to_json() == json_format.MessageToDict(
            message, preserving_proto_field_name=True
        )
        # confluent-kafka's own deserializer reads the same frame to the same message.
        theirs = confluent_decode(client, type(message), value, topic, headers)
        assert theirs == message


def test_map_entry_convention_matches_confluent_python_serializer(pb, client):
    nested, _ = pb
    inner = nested.Envelope.Inner(kind=1)
    value, _ = confluent_frame(client, inner, "map-trap")
    frame = parse_frame(value)
    # Envelope declares map<> counts before Inner: protoc's CountsEntry is nested message 0,
    # and confluent-kafka's Python serializer counts it, so Inner is [0, 1].
    assert frame.message_indexes == (0, 1)
    assert value[5:8] == bytes.fromhex("040002")
    resolved = SchemaResolver(ConfluentMockRegistry(client)).resolve(frame)
    assert resolved.message_type_for((0, 1)) == "cfx.Envelope.Inner"
    assert resolved.message_type_for((0, 1, 0)) == "cfx.Envelope.Inner.Deep"
    with pytest.raises(UnknownMessage, match="map entry"):
        resolved.message_type_for((0, 0))
    # Known: First [1, 0], ByEntry [1, 1] (map declared after First), Last [1, 2].
    assert resolved.message_type_for((1, 2)) == "cfx.Known.Last"
    assert resolved.indexes_of("cfx.Known.Last") == (1, 2)
    assert "cfx.Envelope.CountsEntry" not in resolved.message_types
    assert resolved.message_types[:2] == ("cfx.Envelope", "cfx.Envelope.Inner")


def test_references_resolve_under_their_names_and_registry_is_asked_once(pb, client):
    nested, _ = pb
    registry = ConfluentMockRegistry(client)
    decoder = Decoder(registry)
    messages = samples(pb)[:3]
    frames = [confluent_frame(client, m, "once")[0] for m in messages]
    for _ in range(20):
        for value, message in zip(frames, messages, strict=True):
            assert same(decoder.decode(value).message, message)
    ids = [c for c in registry.calls if c[0] == "id"]
    refs = [c for c in registry.calls if c[0] == "subject"]
    assert len(ids) == 1  # one schema id for all three messages (same file)
    assert refs == [("subject", ("cfx/common.proto", 1))]  # builtins are never fetched


def test_well_known_types_registered_as_references_resolve(pb, client):
    nested, _ = pb
    known = samples(pb)[4]
    value, _ = confluent_frame(client, known, "wkt-registered", conf={"skip.known.types": False})
    schema = client.get_schema(parse_frame(value).schema_id)
    names = {r.name for r in schema.references}
    assert {
        "google/protobuf/any.proto",
        "google/type/date.proto",
    } <= names  # producer registered them
    registry = ConfluentMockRegistry(client)
    record = Decoder(registry).decode(value)
    assert same(record.message, known)
    fetched = {c[1][0] for c in registry.calls if c[0] == "subject"}
    assert fetched == {"cfx/common.proto"}  # the bundled well-known files are used instead


def test_proto2_defaults_and_required(pb, client):
    _, legacy = pb
    value, _ = confluent_frame(client, legacy.Legacy(name="only"), "legacy")
    record = Decoder(ConfluentMockRegistry(client)).decode(value)
    assert record.message.n == 7  # proto2 default from the writer schema
    assert not record.message.HasField("n")
    assert record.to_json() == {"name": "only"}


@pytest.mark.parametrize("header_form", [False, True], ids=["prefix", "header"])
def test_framed_keys(pb, client, header_form):
    nested, _ = pb
    key = nested.Envelope.Inner.Deep(note="key-1")
    value = nested.Known.Last(n=3)
    key_bytes, key_headers = confluent_frame(
        client, key, "keyed", header_form=header_form, is_key=True
    )
    value_bytes, value_headers = confluent_frame(client, value, "keyed", header_form=header_form)
    headers = key_headers + value_headers
    if header_form:
        assert [h[0] for h in headers] == ["__key_schema_id", "__value_schema_id"]
    decoder = Decoder(ConfluentMockRegistry(client))
    assert same(decoder.decode(key_bytes, headers, is_key=True).message, key)
    assert same(decoder.decode(value_bytes, headers).message, value)
