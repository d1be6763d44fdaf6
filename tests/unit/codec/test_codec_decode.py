"""Decoding payloads: unknown fields, invalid UTF-8, malformed bytes, error context."""

from __future__ import annotations

import re
import textwrap

import pytest

from codec import (
    BadPayload,
    Decoder,
    NotProtobuf,
    RegisteredSchema,
    UnknownFields,
    UnknownMessage,
    UnknownSchema,
    decode_payload,
    decode_payloads,
    has_unknown_fields,
    message_to_json,
    write_frame,
)
from tests.support.codec_test_support import MemoryRegistry

WRITER = textwrap.dedent(
    """\
    syntax = "proto3";
    package dec;
    import "google/protobuf/any.proto";
    message Inner { string name = 1; }
    message Outer {
      string text = 1;
      int64 big = 2;
      Inner inner = 3;
      repeated Inner many = 4;
      map<string, Inner> by = 5;
      google.protobuf.Any any = 6;
      bytes raw = 7;
    }
    """
)
# A newer version of the schema: the writer of these payloads knew fields the reader does not.
NEWER = (
    WRITER.replace("string name = 1;", "string name = 1; int32 added = 9;")
    .replace("bytes raw = 7;", "bytes raw = 7; string extra = 15;")
    .replace("package dec;", "package decnew;")
)
PROTO2 = 'syntax = "proto2"; package dec2; message P { optional string s = 1; enum E { A = 1; } optional E e = 2; }'


@pytest.fixture(scope="module")
def setup():
    reg = MemoryRegistry()
    reg.add(1, RegisteredSchema(WRITER))
    reg.add(2, RegisteredSchema(NEWER))
    reg.add(3, RegisteredSchema(PROTO2))
    decoder = Decoder(reg)
    newer = decoder.resolver.resolve_id(2)
    outer_new = newer.message_class_for((1,))
    return reg, decoder, outer_new


def test_decode_and_json_mapping(setup):
    _, decoder, outer_new = setup
    cls = decoder.resolver.resolve_id(1).message_class_for((1,))
    msg = cls(text="hé", big=2**40, raw=b"\x00\x01")
    msg.inner.name = "a"
    msg.by["k"].name = "v"
    packed = decoder.resolver.resolve_id(1).message_class_for((0,))(name="in any")
    msg.any.Pack(packed)
    record = decoder.decode(write_frame(1, [1], msg.SerializeToString()))
    assert record.message_type == "dec.Outer"
    assert record.schema_id == 1 and record.schema_guid is None and record.message_indexes == (1,)
    assert record.has_unknown_fields is False
    assert record.to_json() == {
        "text": "hé",
        "big": str(2**40),  # canonical JSON: 64-bit integers are strings
        "inner": {"name": "a"},
        "by": {"k": {"name": "v"}},
        "any": {"@type": "type.googleapis.com/dec.Inner", "name": "in any"},
        "raw": "AAE=",
    }
    assert message_to_json(record.message) == record.to_json()


@pytest.mark.parametrize("where", ["top", "nested", "repeated", "map value"])
def test_unknown_fields_are_an_error_by_default_at_any_depth(setup, where):
    _, decoder, outer_new = setup
    msg = outer_new(text="t")
    if where == "top":
        msg.extra = "unknown to the old schema"
    elif where == "nested":
        msg.inner.added = 5
    elif where == "repeated":
        msg.many.add(name="x")
        msg.many.add(added=3)
    else:
        msg.by["k"].added = 1
    value = write_frame(1, [1], msg.SerializeToString())
    with pytest.raises(UnknownFields) as info:
        decoder.decode(value)
    err = info.value
    assert (err.code, err.stage, err.record_fault) == ("UNKNOWN_FIELDS", "payload", True)
    assert (err.schema_id, err.message_indexes, err.message_type) == (1, (1,), "dec.Outer")


def test_unknown_fields_kept_when_allowed(setup):
    reg, _, outer_new = setup
    msg = outer_new(text="t", extra="kept")
    msg.inner.added = 7
    payload = msg.SerializeToString()
    record = Decoder(reg, allow_unknown_fields=True).decode(write_frame(1, [1], payload))
    assert record.has_unknown_fields is True
    assert record.message.text == "t"
    # The unknown bytes survive: re-serializing and reading with the newer schema gets them back.
    again = outer_new.FromString(record.message.SerializeToString())
    assert (again.extra, again.inner.added) == ("kept", 7)
    assert has_unknown_fields(record.message)  # and the check did not strip them
    clean = Decoder(reg, allow_unknown_fields=True).decode(write_frame(1, [1], b"\x0a\x01t"))
    assert clean.has_unknown_fields is False


def test_proto2_unknown_enum_value_is_an_unknown_field(setup):
    _, decoder, _ = setup
    with pytest.raises(UnknownFields):
        decoder.decode(write_frame(3, [0], b"\x10\x05"))  # e = 5, not in enum E
    assert decoder.decode(write_frame(3, [0], b"\x10\x01")).message.e == 1


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"\x0a\x02\xff\xfe", "bad UTF-8"),
        (b"\x0a\x05ab", "truncated length-delimited"),
        (b"\x08", "truncated varint"),
        (b"\x1a\x03\x0a\x05x", "nested truncated"),
        (b"\x07", "field number 0"),
        (b"\x0b\x10\x01", "unterminated group"),
    ],
)
def test_bad_payload(setup, payload, why):
    _, decoder, _ = setup
    with pytest.raises(BadPayload) as info:
        decoder.decode(write_frame(1, [1], payload))
    err = info.value
    assert (err.code, err.stage) == ("BAD_PAYLOAD", "payload")
    assert err.message_type == "dec.Outer" and err.schema_id == 1


def test_errors_carry_frame_context(setup):
    _, decoder, _ = setup
    with pytest.raises(UnknownMessage) as info:
        decoder.decode(write_frame(1, [7, 1], b""))
    assert (info.value.schema_id, info.value.message_indexes) == (1, (7, 1))
    with pytest.raises(UnknownSchema) as info:
        decoder.decode(write_frame("0f8fad5b-d9cb-469f-a165-70867728950e", [0], b""))
    assert info.value.schema_guid == "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert info.value.record_fault is True


def test_decode_payload_directly(setup):
    _, decoder, _ = setup
    cls = decoder.resolver.resolve_id(1).message_class_for((0,))
    assert decode_payload(cls, memoryview(b"\x0a\x01z")).name == "z"
    assert decode_payload(cls, b"").name == ""
    with pytest.raises(UnknownFields):
        decode_payload(cls, b"\x10\x01")
    assert decode_payload(cls, b"\x10\x01", allow_unknown_fields=True).name == ""


def test_any_with_unknown_type_url_still_decodes(setup):
    _, decoder, _ = setup
    cls = decoder.resolver.resolve_id(1).message_class_for((1,))
    msg = cls()
    msg.any.type_url = "type.googleapis.com/nowhere.X"
    msg.any.value = b"\x08\x01"
    record = decoder.decode(write_frame(1, [1], msg.SerializeToString()))
    assert record.message.any.type_url.endswith("nowhere.X")
    # The JSON mapping of an Any whose type is unknown must fail (protobuf's JSON spec):
    # a codec error naming why, not a TypeError from json_format.
    with pytest.raises(BadPayload, match="no canonical JSON mapping.*nowhere.X"):
        record.to_json()


def _outer_with_any(setup, packed_type: str, packed: bytes, nest: int = 0) -> bytes:
    """An Outer payload whose `any` packs `packed` (of `packed_type`), inside `nest` more
    Outers each packed in the next one's `any`."""
    _, decoder, _ = setup
    cls = decoder.resolver.resolve_id(1).message_class_for((1,))
    msg = cls()
    msg.any.type_url = f"type.googleapis.com/{packed_type}"
    msg.any.value = packed
    for _ in range(nest):
        outer = cls()
        outer.any.Pack(msg)
        msg = outer
    return msg.SerializeToString()


@pytest.mark.parametrize("nest", [0, 3])
def test_unknown_fields_packed_in_an_any_are_not_lost(setup, nest):
    reg, decoder, outer_new = setup
    # dec.Inner {name = "ok"} plus field 9, which dec.Inner does not define
    payload = _outer_with_any(setup, "dec.Inner", b"\x0a\x02ok" + b"\x48\x05", nest)
    value = write_frame(1, [1], payload)
    with pytest.raises(UnknownFields, match=r"dec.Inner packed in google.protobuf.Any at any"):
        decoder.decode(value)
    outer = decoder.resolver.resolve_id(1).message_class_for((1,))
    batch = decode_payloads(outer, [payload, b"\x0a\x01t"])  # the wrapper checks it too
    assert isinstance(batch[0], UnknownFields) and batch[1].text == "t"
    kept = Decoder(reg, allow_unknown_fields=True).decode(value)
    assert kept.message.SerializeToString() == payload  # kept, byte for byte


@pytest.mark.parametrize(
    ("packed", "error", "why"),
    [
        (b"\x0a\x05ab", BadPayload, "truncated"),
        (b"\x0a\x02\xff\xfe", BadPayload, "UTF-8"),
    ],
)
@pytest.mark.parametrize("allow_unknown_fields", [False, True])
def test_a_packed_message_that_does_not_parse_is_bad_payload(
    setup, packed, error, why, allow_unknown_fields
):
    reg, _, _ = setup
    decoder = Decoder(reg, allow_unknown_fields=allow_unknown_fields)
    value = write_frame(1, [1], _outer_with_any(setup, "dec.Inner", packed))
    with pytest.raises(error, match="dec.Inner packed in google.protobuf.Any at any: protobuf"):
        decoder.decode(value)
    outer = decoder.resolver.resolve_id(1).message_class_for((1,))
    payload = value[len(write_frame(1, [1])) :]
    batch = decode_payloads(outer, [payload, payload], allow_unknown_fields=allow_unknown_fields)
    assert isinstance(batch[1], error)


def test_anys_nested_too_deep_are_bad_payload(setup):
    _, decoder, _ = setup
    fine = _outer_with_any(setup, "dec.Inner", b"\x0a\x01x", 15)
    assert decoder.decode(write_frame(1, [1], fine)).to_json()["any"]["@type"].endswith("Outer")
    deep = _outer_with_any(setup, "dec.Inner", b"\x0a\x01x", 16)
    with pytest.raises(BadPayload, match="nested more than 16 deep"):
        decoder.decode(write_frame(1, [1], deep))


@pytest.mark.parametrize(
    ("schema", "build", "why"),
    [
        (
            'import "google/protobuf/timestamp.proto"; message T { google.protobuf.Timestamp at = 1; }',
            lambda m: setattr(m.at, "seconds", 10**12),  # milliseconds written as seconds
            "Timestamp",
        ),
        (
            'import "google/protobuf/duration.proto"; message T { google.protobuf.Duration d = 1; }',
            lambda m: (setattr(m.d, "seconds", 5), setattr(m.d, "nanos", -1)),
            "Duration",
        ),
        (
            'import "google/protobuf/struct.proto"; message T { google.protobuf.Value v = 1; }',
            lambda m: setattr(m.v, "number_value", float("inf")),
            "",
        ),
    ],
)
def test_a_message_the_json_mapping_cannot_write_is_bad_payload(schema, build, why):
    reg = MemoryRegistry()
    reg.add(40, RegisteredSchema(f'syntax = "proto3"; package decjson; {schema}'))
    decoder = Decoder(reg)
    msg = decoder.resolver.resolve_id(40).message_class_for((0,))()
    build(msg)
    record = decoder.decode(write_frame(40, [0], msg.SerializeToString()))
    assert record.message.SerializeToString() == msg.SerializeToString()  # decoding is fine
    with pytest.raises(BadPayload, match=f"decjson.T has no canonical JSON mapping: .*{why}"):
        record.to_json()


REQUIRED = textwrap.dedent(
    """\
    syntax = "proto2";
    package dec2r;
    message Line { required string sku = 1; optional int32 qty = 2; }
    message Stock { required int64 id = 1; repeated Line lines = 2; }
    """
)


@pytest.mark.parametrize("allow_unknown_fields", [False, True])
def test_a_missing_required_field_is_bad_payload_not_a_crash(allow_unknown_fields):
    reg = MemoryRegistry()
    reg.add(7, RegisteredSchema(REQUIRED))
    cls = Decoder(reg).resolver.resolve_id(7).message_class_for((1,))
    whole = cls(id=1)
    whole.lines.add(sku="a", qty=2)
    no_id = cls()
    no_id.lines.add(sku="b")
    deep = cls(id=3)
    deep.lines.add(qty=1)  # the nested Line misses its sku
    payloads = [
        whole.SerializePartialToString(),
        no_id.SerializePartialToString(),
        deep.SerializePartialToString(),
    ]
    options = {"allow_unknown_fields": allow_unknown_fields}
    assert decode_payload(cls, payloads[0], **options) == whole
    for payload, missing in zip(payloads[1:], ["id", "lines[0].sku"], strict=True):
        with pytest.raises(BadPayload, match=rf"missing required fields: {re.escape(missing)}$"):
            decode_payload(cls, payload, **options)
    # the batch path (one parse per chunk) gives each payload its own verdict
    results = decode_payloads(cls, payloads * 3, **options)
    assert [type(r).__name__ for r in results] == ["Stock", "BadPayload", "BadPayload"] * 3
    assert {r.code for r in results if isinstance(r, BadPayload)} == {"BAD_PAYLOAD"}


def test_a_remembered_schema_error_is_raised_fresh_for_every_record():
    registry = MemoryRegistry()
    registry.add(2, RegisteredSchema('{"type": "int"}', schema_type="AVRO"))
    decoder = Decoder(registry)
    errors = []
    for indexes in ([0], [1], [2, 0]) * 40:
        with pytest.raises(NotProtobuf) as info:
            decoder.decode(write_frame(2, indexes, b""))
        errors.append(info.value)
    assert registry.calls == [("id", 2)]  # the schema is asked for once ...
    assert len({id(e) for e in errors}) == len(errors)  # ... each record gets its own error
    assert [e.message_indexes for e in errors[:3]] == [(0,), (1,), (2, 0)]
    assert {e.schema_id for e in errors} == {2} and len({str(e) for e in errors}) == 1

    def depth(exc):
        n, tb = 0, exc.__traceback__
        while tb is not None:
            n, tb = n + 1, tb.tb_next
        return n

    assert depth(errors[-1]) == depth(errors[1])  # no traceback growing with every raise


PROTO2_STRINGS = (
    'syntax = "proto2"; package p2utf; message N { optional string t = 1; }'
    " message M { optional int32 a = 1; optional string s = 2; repeated string rs = 3;"
    " map<string, string> m = 4; optional N n = 5; map<string, N> mn = 6; }"
)


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        (b"\x12\x02\xff\xfe", "s"),
        (b"\x1a\x01a\x1a\x01\xff", "rs"),
        (b"\x22\x06\x0a\x01\xff\x12\x01v", "m (a key)"),
        (b"\x22\x06\x0a\x01k\x12\x01\xff", "m['k']"),
        (b"\x2a\x03\x0a\x01\xff", "n.t"),
        (b"\x32\x08\x0a\x01k\x12\x03\x0a\x01\xff", "mn['k'].t"),
    ],
)
def test_a_proto2_string_that_is_not_utf8_has_no_json(payload, path):
    # proto2 does not validate UTF-8, so protobuf parses these (and hands out bytes); the
    # JSON mapping cannot carry them and says which field, instead of printing b'\xff'
    registry = MemoryRegistry()
    registry.add(1, RegisteredSchema(PROTO2_STRINGS))
    decoder = Decoder(registry)
    record = decoder.decode(write_frame(1, [1], payload))
    with pytest.raises(BadPayload, match=re.escape(f"string field {path} holds bytes")):
        record.to_json()
    fine = decoder.decode(write_frame(1, [1], b"\x08\x05\x12\x02ok\x22\x06\x0a\x01k\x12\x01v"))
    assert fine.to_json() == {"a": 5, "s": "ok", "m": {"k": "v"}}
