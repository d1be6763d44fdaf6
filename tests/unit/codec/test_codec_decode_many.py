"""`Decoder.decode_many` must give, record by record, exactly what `Decoder.decode` gives."""

from __future__ import annotations

import gc
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import codec.payload as codec_payload
from codec import (
    CodecError,
    DecodedBatch,
    DecodedRecord,
    Decoder,
    RegisteredSchema,
    RegistryUnavailable,
    write_frame,
)
from codec.framing import KEY_SCHEMA_ID_HEADER, VALUE_SCHEMA_ID_HEADER
from tests.support.codec_test_support import MemoryRegistry

SCHEMA = textwrap.dedent(
    """\
    syntax = "proto3";
    package many;
    message Leaf { string s = 1; sint64 z = 2; }
    message Rec {
      string name = 1;
      int64 n = 2;
      repeated int32 xs = 3;
      Leaf leaf = 4;
      map<string, Leaf> m = 5;
      message Inner { bool flag = 1; }
      Inner inner = 6;
    }
    """
)
# proto2 with a required field: the batch path checks IsInitialized on the wrapper
SCHEMA_V2 = textwrap.dedent(
    """\
    syntax = "proto2";
    package many2;
    message Strict { required string id = 1; optional int32 qty = 2; }
    """
)
GUID = "3f2504e0-4f89-11d3-9a0c-0305e82c3301"


def _registry() -> MemoryRegistry:
    registry = MemoryRegistry()
    registry.add(1, RegisteredSchema(SCHEMA), guid=GUID)
    registry.add(2, RegisteredSchema('{"type": "int"}', schema_type="AVRO"))
    registry.add(3, RegisteredSchema('syntax = "proto3"; message Broken { Nope x = 1; }'))
    registry.add(4, RegisteredSchema(SCHEMA_V2))
    return registry


REGISTRY = _registry()
STRICT = Decoder(REGISTRY)
KEEPING = Decoder(REGISTRY, allow_unknown_fields=True)
LEAF = STRICT.resolver.resolve_id(1).message_class_for((0,))
REC = STRICT.resolver.resolve_id(1).message_class_for((1,))
STRICT2 = STRICT.resolver.resolve_id(4).message_class_for((0,))

settings.register_profile("codec", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("codec")

leaves = st.builds(LEAF, s=st.text(max_size=8), z=st.integers(-(2**63), 2**63 - 1))
recs = st.builds(
    REC,
    name=st.text(max_size=12),
    n=st.integers(-(2**63), 2**63 - 1),
    xs=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4),
    leaf=leaves,
    m=st.dictionaries(st.text(max_size=4), leaves, max_size=4),
)
# xs = [-1] written unpacked with a 5-byte varint (protobuf accepts it and re-encodes it
# packed in 12 bytes), then 6 bytes of unknown field 15: the same 12 bytes once the unknown
# field is discarded. A size comparison with the input would miss the unknown field.
HIDDEN_UNKNOWN = b"\x18\xff\xff\xff\xff\x0f" + b"\x7a\x04abcd"
rec_payloads = recs.map(lambda m: m.SerializeToString())
payloads = st.one_of(
    rec_payloads,
    rec_payloads,
    st.builds(lambda p, q: p + q, rec_payloads, rec_payloads),  # valid, not canonical (merge)
    rec_payloads.map(lambda p: p + b"\xa2\x06\x01x"),  # unknown field 100
    rec_payloads.map(lambda p: p + b"\x32\x03\xa2\x06\x00"),  # unknown field inside `inner`
    st.binary(max_size=20),  # mostly malformed
    st.just(b"\x0a\x02\xff\xfe"),  # invalid UTF-8
    st.just(b""),
    st.just(HIDDEN_UNKNOWN),
)
strict_payloads = st.one_of(
    st.builds(STRICT2, id=st.text(max_size=5), qty=st.integers(0, 9)).map(
        lambda m: m.SerializeToString()
    ),
    st.just(b"\x10\x01"),  # `id` is required and missing
)
# A value: mostly the common frame `00 | id | 00 | payload` (ids 1 and 4 resolve; 2 is AVRO,
# 3 does not compile, 404 is not registered), then every other shape of the framing.
values = st.one_of(
    st.builds(lambda p: write_frame(1, [1], p), payloads),
    st.builds(lambda p: write_frame(1, [1], p), payloads),
    st.builds(lambda p: write_frame(1, [0], p), leaves.map(lambda m: m.SerializeToString())),
    st.builds(lambda p: write_frame(4, [0], p), strict_payloads),
    st.builds(lambda i, p: write_frame(i, [0], p), st.sampled_from([2, 3, 404]), payloads),
    st.builds(lambda p: write_frame(1, [7], p), payloads),  # no 8th message: UNKNOWN_MESSAGE
    st.builds(lambda p: write_frame(GUID, [1], p), payloads),
    st.builds(lambda p: write_frame(1, [1, 0], p), payloads),  # Rec.Inner: indexes [1, 0]
    st.binary(max_size=8),  # short and odd frames
    st.just(b"\x00\x00\x00\x00\x01\x00"),  # a frame with an empty payload
    st.none(),
    st.binary(max_size=3).map(lambda b: b"\x00\x00\x00\x00\x01" + b),
    payloads.map(bytearray),  # not bytes: decoded one by one
)
header_lists = st.one_of(
    st.none(),
    st.just([]),
    st.lists(
        st.tuples(
            st.sampled_from([VALUE_SCHEMA_ID_HEADER, KEY_SCHEMA_ID_HEADER, "trace"]),
            st.one_of(st.none(), st.just(write_frame(GUID, [1])), st.binary(max_size=6)),
        ),
        max_size=2,
    ),
)


def _outcome(decoder: Decoder, value, headers, is_key):
    """What `decode` gives for one record, in comparable form."""
    try:
        return _comparable(decoder.decode(value, headers, is_key))
    except CodecError as exc:
        return _comparable(exc)


def _comparable(result):
    if isinstance(result, CodecError):
        return (
            "error",
            type(result).__name__,
            str(result),
            result.schema_id,
            result.schema_guid,
            result.message_indexes,
            result.message_type,
        )
    assert type(result) is DecodedRecord
    return (
        "record",
        result.frame,
        result.schema,
        result.message_type,
        type(result.message),
        result.message.SerializeToString(deterministic=True),
    )


@given(
    st.lists(st.tuples(values, header_lists), max_size=25),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
@settings(max_examples=300)
def test_decode_many_equals_decode_record_by_record(rows, keep_unknown, is_key, with_headers):
    decoder = KEEPING if keep_unknown else STRICT
    batch_values = [value for value, _ in rows]
    batch_headers = [h for _, h in rows] if with_headers else None
    batch = decoder.decode_many(batch_values, batch_headers, is_key=is_key)
    assert isinstance(batch, DecodedBatch) and len(batch) == len(rows)
    expected = [_outcome(decoder, value, h if with_headers else None, is_key) for value, h in rows]
    assert [_comparable(r) for r in batch] == expected
    # the columns say the same as the records built from them
    for i, result in enumerate(batch.results):
        if isinstance(result, CodecError):
            assert batch.frames[i] is batch.schemas[i] is batch.message_types[i] is None
        else:
            assert (
                batch[i].message is result
                and batch.message_types[i] == type(result).DESCRIPTOR.full_name
            )


@given(st.lists(values, min_size=1, max_size=40), st.integers(1, 200), st.booleans())
def test_decode_many_in_small_chunks_still_equals_decode(batch_values, chunk, keep_unknown):
    # Tiny chunks put chunk boundaries everywhere, bad payloads on either side of them.
    decoder = KEEPING if keep_unknown else STRICT
    real = codec_payload._CHUNK_BYTES
    codec_payload._CHUNK_BYTES = chunk
    try:
        batch = decoder.decode_many(batch_values)
    finally:
        codec_payload._CHUNK_BYTES = real
    expected = [_outcome(decoder, value, None, False) for value in batch_values]
    assert [_comparable(r) for r in batch] == expected


@pytest.mark.parametrize("equality_first", [True, False], ids=["equality", "size"])
@given(st.lists(payloads, min_size=2, max_size=20))
def test_both_unknown_field_tests_agree_with_decode(equality_first, batch_payloads):
    # decode_payloads checks a clean wrapper by re-encoding it (exact when the bytes match)
    # or by size (always exact); both must find exactly the payloads decode_payload rejects.
    facts = codec_payload._facts_of(REC)
    facts.equality_pays = equality_first
    try:
        batch = STRICT.decode_many([write_frame(1, [1], p) for p in batch_payloads])
    finally:
        facts.equality_pays = True
    expected = [_outcome(STRICT, write_frame(1, [1], p), None, False) for p in batch_payloads]
    assert [_comparable(r) for r in batch] == expected


def test_a_valid_but_not_canonical_batch_switches_the_type_to_the_size_test():
    cls = STRICT.resolver.resolve_id(1).message_class_for((0,))  # many.Leaf
    facts = codec_payload._facts_of(cls)
    facts.equality_pays = True
    canonical = [write_frame(1, [0], LEAF(s=f"s{i}", z=i).SerializeToString()) for i in range(5)]
    assert all(type(r) is DecodedRecord for r in STRICT.decode_many(canonical))
    assert facts.equality_pays is True
    # `s` written twice: valid protobuf (the last one wins), but it re-encodes shorter
    twice = [write_frame(1, [0], b"\x0a\x01a\x0a\x01b") for _ in range(3)]
    batch = STRICT.decode_many(twice)
    assert [r.message.s for r in batch] == ["b", "b", "b"]
    assert facts.equality_pays is False
    # and the size test still finds unknown fields
    batch = STRICT.decode_many([*canonical, write_frame(1, [0], b"\xa2\x06\x01x")])
    assert [type(r).__name__ for r in batch][-1] == "UnknownFields"
    facts.equality_pays = True


def test_one_schema_batch_shares_its_frame_and_asks_the_registry_once():
    registry = _registry()
    decoder = Decoder(registry)
    frames = [
        write_frame(1, [1], REC(name=f"r{i}", n=i).SerializeToString()) for i in range(50)
    ]  # 00 | id | 02 02
    frames += [write_frame(404, [0], b"") for _ in range(20)]  # not registered
    batch = decoder.decode_many(frames)
    assert [r.name for r in batch.results[:50]] == [f"r{i}" for i in range(50)]
    assert len({id(f) for f in batch.frames[:50]}) == 1
    assert [type(r).__name__ for r in batch.results[50:]] == ["UnknownSchema"] * 20
    assert len({id(r) for r in batch.results[50:]}) == 20  # one error object per record
    assert all(r.schema_id == 404 for r in batch.results[50:])
    assert sorted(registry.calls) == [("id", 1), ("id", 404)]


def test_headers_must_match_the_values():
    with pytest.raises(ValueError, match="2 headers for 1 values"):
        STRICT.decode_many([write_frame(1, [1], b"")], [None, None])


def test_an_unreachable_registry_fails_the_batch_instead_of_blaming_records():
    class Down(MemoryRegistry):
        def get_schema_by_id(self, schema_id):
            raise RegistryUnavailable("registry unreachable: connection refused")

    decoder = Decoder(Down())
    header = [(VALUE_SCHEMA_ID_HEADER, write_frame(1, [0]))]
    for frames, headers in (
        ([write_frame(1, [1], b"")] * 3, None),  # the grouped path
        ([b"", b""], [header, header]),  # one by one (schema headers)
    ):
        with pytest.raises(RegistryUnavailable):
            decoder.decode_many(frames, headers)
        assert gc.isenabled()  # decode_many pauses the collector, and restores it on error
    gc.disable()
    try:
        STRICT.decode_many([write_frame(1, [1], b"")] * 2)
        assert not gc.isenabled()  # ... to what it was
    finally:
        gc.enable()


def test_records_with_headers_or_odd_values_keep_their_place():
    good = write_frame(1, [1], REC(name="a").SerializeToString())
    header = [(VALUE_SCHEMA_ID_HEADER, write_frame(GUID, [1]))]
    bare = REC(name="h").SerializeToString()
    batch = STRICT.decode_many([good, bare, None, good], [None, header, None, []])
    assert [type(r).__name__ for r in batch] == [
        "DecodedRecord",
        "DecodedRecord",
        "EmptyValue",
        "DecodedRecord",
    ]
    assert batch[1].message.name == "h" and batch[1].frame.source == "header"
    assert batch[1].schema_guid == GUID and batch[0].schema_id == 1
    assert [r.message.name for r in batch[::3]] == ["a", "a"]
    assert repr(batch) == "DecodedBatch(4 records, 1 errors)"


@pytest.mark.parametrize("equality_first", [True, False], ids=["equality", "size"])
def test_unknown_fields_hidden_by_a_longer_re_encoding_are_found(equality_first):
    message = REC.FromString(HIDDEN_UNKNOWN)
    assert list(message.xs) == [-1] and len(HIDDEN_UNKNOWN) == 12
    message.DiscardUnknownFields()
    assert message.ByteSize() == len(HIDDEN_UNKNOWN)  # the trap: same size without it
    facts = codec_payload._facts_of(REC)
    facts.equality_pays = equality_first
    good = REC(name="ok").SerializeToString()
    try:
        results = codec_payload.decode_payloads(REC, [good, HIDDEN_UNKNOWN, good])
        batch = STRICT.decode_many([write_frame(1, [1], p) for p in (good, HIDDEN_UNKNOWN)])
    finally:
        facts.equality_pays = True
    assert [type(r).__name__ for r in results] == ["Rec", "UnknownFields", "Rec"]
    assert str(results[1]) == "payload has 6 bytes of fields that many.Rec does not define"
    assert [type(r).__name__ for r in batch] == ["DecodedRecord", "UnknownFields"]


def test_many_bad_frames_sharing_a_head_take_one_round_not_one_each(monkeypatch):
    rounds = []
    real = Decoder._decode_framed_alike

    def counting(self, *args, **kwargs):
        rounds.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Decoder, "_decode_framed_alike", counting)
    good = write_frame(1, [1], REC(name="g").SerializeToString())
    truncated = [good[: 5 + i % 2] + b"\x80" * (i % 3) for i in range(3000)]  # bad indexes
    values = [b""] * 3000 + truncated + [good] * 10
    batch = STRICT.decode_many(values)
    assert [type(r).__name__ for r in batch.results[:3000]] == ["EmptyValue"] * 3000
    assert {type(r).__name__ for r in batch.results[3000:6000]} == {"Truncated"}
    assert [r.name for r in batch.results[6000:]] == ["g"] * 10
    # a round per distinct six-byte head and frame head, not one per bad frame (each round
    # scans what is left of its group: one per bad frame made a batch of bad frames quadratic)
    assert len(rounds) < 10


def _registry_with(schema_text):
    registry = MemoryRegistry()
    registry.add(1, RegisteredSchema(schema_text))
    return Decoder(registry), Decoder(registry, allow_unknown_fields=True)


def test_a_required_field_inside_an_extension_is_checked():
    strict, keeping = _registry_with(
        'syntax = "proto2"; package manyext;'
        " message Base { optional int32 a = 1; extensions 100 to 200; }"
        " message Req { required int32 x = 1; }"
        " extend Base { optional Req req_ext = 100; }"
    )
    good = write_frame(1, [0], b"\x08\x01")
    bad = write_frame(1, [0], b"\xa2\x06\x00")  # req_ext set, its x missing
    for decoder in (strict, keeping):
        with pytest.raises(CodecError, match=r"missing required fields: \(manyext.req_ext\).x"):
            decoder.decode(bad)
        batch = decoder.decode_many([good, bad])
        assert [type(r).__name__ for r in batch] == ["DecodedRecord", "BadPayload"]


def test_a_required_field_behind_a_map_key_that_is_not_utf8_is_bad_payload():
    strict, _ = _registry_with(
        'syntax = "proto2"; package manymap;'
        " message Req { required int32 x = 1; } message M { map<string, Req> m = 1; }"
    )
    value = write_frame(1, [1], b"\x0a\x05\x0a\x01\xff\x12\x00")  # key b"\xff", x missing
    with pytest.raises(CodecError, match="m\\[a key that is not UTF-8\\]") as info:
        strict.decode(value)
    assert info.value.code == "BAD_PAYLOAD"
    assert [r.code for r in strict.decode_many([value, value]).results] == ["BAD_PAYLOAD"] * 2


def test_payloads_may_be_any_buffers_in_any_sequence():
    from collections import deque

    from codec.payload import decode_payload, decode_payloads

    raw = REC(name="abc", xs=[1]).SerializeToString()
    assert len(raw) % 2 == 0
    items = memoryview(raw).cast("H")  # len() counts 2-byte items, not bytes
    expected = decode_payload(REC, raw)
    got = decode_payloads(REC, [items, bytearray(raw), raw])
    assert [m.SerializeToString() for m in got] == [expected.SerializeToString()] * 3
    real = codec_payload._CHUNK_BYTES
    codec_payload._CHUNK_BYTES = 10  # several chunks: the sequence is sliced
    try:
        batch = STRICT.decode_many(deque([write_frame(1, [1], raw)] * 5))
    finally:
        codec_payload._CHUNK_BYTES = real
    assert [r.name for r in batch.results] == ["abc"] * 5


@pytest.mark.parametrize("depth", [1, 61, 62, 63, 64, 80, 99])
def test_unknown_fields_are_found_at_any_depth_protobuf_parses(depth):
    # upb's DiscardUnknownFields stops 62 levels down; parsing goes to 100 (codec.depth)
    from codec.payload import decode_payload, decode_payloads, has_unknown_fields
    from codec.varint import write_uvarint64

    strict, keeping = _registry_with(
        'syntax = "proto3"; package manydeep; message N { N c = 1; map<string, N> m = 2; }'
    )
    node = strict.resolver.resolve_id(1).message_class_for((0,))

    def nest(levels, inner, tag=b"\x0a"):
        for _ in range(levels):
            inner = tag + write_uvarint64(len(inner)) + inner
        return inner

    unknown = b"\xa2\x06\x01x"  # field 100
    hidden = nest(depth, unknown)
    clean = nest(depth, b"")
    # through a map value too: entry (key "k", value N) -> levels below
    in_map = (
        b"\x12"
        + write_uvarint64(len(e := b"\x0a\x01k\x12" + write_uvarint64(len(hidden)) + hidden))
        + e
    )
    for bad in (hidden, in_map) if depth < 98 else (hidden,):  # a map adds two levels
        with pytest.raises(CodecError) as info:
            decode_payload(node, bad)
        assert info.value.code == "UNKNOWN_FIELDS"
        got = decode_payloads(node, [clean, bad, clean])
        assert [type(r).__name__ for r in got] == ["N", "UnknownFields", "N"]
        batch = strict.decode_many([write_frame(1, [0], p) for p in (clean, bad)])
        assert [type(r).__name__ for r in batch] == ["DecodedRecord", "UnknownFields"]
        kept = keeping.decode(write_frame(1, [0], bad))
        assert kept.has_unknown_fields and has_unknown_fields(kept.message)
        assert kept.message.SerializeToString() == bad  # kept, and re-encoded as it came
    assert not keeping.decode(write_frame(1, [0], clean)).has_unknown_fields
