"""registry_server.proto_text.render_proto: descriptor -> .proto text protoc compiles back.

Each case is compiled by protoc, rendered, compiled again, and the two
FileDescriptorProtos must be equal: the text a registry answers loses nothing.
"""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2, timestamp_pb2
from registry_server.errors import RegistryError
from registry_server.proto_text import render_proto
from registry_server.protobuf import compile_proto_text, parse_serialized
from registry_server.store import SchemaStore

PROTO3 = r"""
syntax = "proto3";
package render.v1;
import "google/protobuf/timestamp.proto";
option java_package = "com.example.render";
option java_multiple_files = true;
option go_package = "example.com/render;render";

message Event {
  reserved 9, 11 to 13;
  reserved "old", "older";
  string id = 1 [json_name = "eventId"];
  google.protobuf.Timestamp at = 2;
  map<string, Nested> by_key = 3;
  map<int64, bytes> blobs = 4;
  repeated int32 packed_ints = 5 [packed = false];
  optional string note = 6;
  oneof body {
    string text = 7;
    Nested nested = 8 [deprecated = true];
  }
  Kind kind = 10;
  message Nested {
    enum Inner { INNER_UNSPECIFIED = 0; INNER_A = 1; }
    Inner inner = 1;
    repeated Nested children = 2;
  }
  enum Kind {
    option allow_alias = true;
    KIND_UNSPECIFIED = 0;
    KIND_A = 1;
    KIND_ALIAS = 1;
    reserved 5, 7 to 9;
  }
}

service EventService {
  rpc Get(Event) returns (Event);
  rpc Watch(stream Event) returns (stream Event) { option deprecated = true; }
}
"""

PROTO2 = r"""
syntax = "proto2";
package render.legacy;

message Legacy {
  required int32 id = 1;
  optional string name = 2 [default = "a \"quoted\"\nline\t\\ é"];
  optional bytes raw = 3 [default = "\001\377abc"];
  optional double ratio = 4 [default = -1.5];
  optional float inf = 5 [default = inf];
  optional Color color = 6 [default = GREEN];
  optional bool flag = 7 [default = true];
  repeated group Item = 8 {
    required string sku = 9;
    optional int32 qty = 10;
  }
  extensions 100 to 199, 1000 to max;
  enum Color { RED = 1; GREEN = 2; }
}

extend Legacy {
  optional string extra = 100;
}

message Holder {
  extend Legacy { optional int32 nested_extra = 101; }
}
"""

EDITIONS = r"""
edition = "2023";
package render.ed;
option features.field_presence = IMPLICIT;

message Ed {
  int32 a = 1;
  int32 b = 2 [features.field_presence = EXPLICIT];
  repeated int32 c = 3;
}
"""


def _timestamp() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(fdp)
    return fdp


@pytest.mark.parametrize("text", [PROTO3, PROTO2, EDITIONS], ids=["proto3", "proto2", "editions"])
def test_render_round_trips_through_protoc(text):
    original = compile_proto_text(text, "render/case.proto", [_timestamp()])
    rendered = render_proto(original)
    again = compile_proto_text(rendered, "render/case.proto", [_timestamp()])
    assert again == original, rendered


def test_parse_serialized_tells_base64_descriptors_from_text():
    original = compile_proto_text(PROTO3, "render/case.proto", [_timestamp()])
    encoded = base64.b64encode(original.SerializeToString()).decode()
    assert parse_serialized(encoded) == original
    assert parse_serialized(PROTO3) is None
    assert parse_serialized("aGVsbG8=") is None  # base64, but not a descriptor
    assert parse_serialized("") is None


def test_store_rejects_a_descriptor_with_an_unresolved_import():
    fdp = descriptor_pb2.FileDescriptorProto(
        name="x.proto", package="x", syntax="proto3", dependency=["missing/dep.proto"]
    )
    fdp.message_type.add(name="X")
    body = {
        "schema": base64.b64encode(fdp.SerializeToString()).decode(),
        "schemaType": "PROTOBUF",
    }
    store = SchemaStore()
    with pytest.raises(RegistryError) as info:
        store.register("x-value", body)
    assert (info.value.status, info.value.error_code) == (422, 42201)
    assert store.subjects == {} and store.schemas == {}


def test_store_ids_versions_and_soft_delete():
    store = SchemaStore(first_id=320)
    a = {"schema": '{"type": "string"}'}
    b = {"schema": '{"type": "int"}'}
    assert store.register("s", a).id == 320
    assert store.register("s", a).id == 320
    assert store.register("s", b).id == 321
    assert [v.version for v in store.subjects["s"]] == [1, 2]
    assert store.delete_subject("s", permanent=False) == [1, 2]
    with pytest.raises(RegistryError) as info:
        store.get_version("s", "latest")
    assert info.value.error_code == 40401
    assert store.register("s", a).id == 320  # re-registering after a soft delete: new version
    assert store.get_version("s", "latest").version == 3
