"""`codec.payload.decode_sliced` (the silver job's upb path: many payloads of one type, each
after the same frame head) must give, payload by payload, exactly what `decode_payload`
gives for the payload alone."""

from __future__ import annotations

import textwrap
from collections import deque

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import codec.payload as codec_payload
from codec import CodecError, Decoder, RegisteredSchema, write_frame
from codec.payload import decode_payload, decode_payloads, decode_sliced
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
    registry.add(4, RegisteredSchema(SCHEMA_V2))
    return registry


REGISTRY = _registry()
STRICT = Decoder(REGISTRY)
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
# the frame heads payloads sit after: `00 | id | 02 02`, a GUID frame's, none
HEAD = write_frame(1, [1])
heads = st.sampled_from([HEAD, write_frame(GUID, [1, 0]), b""])


def _outcome(cls, payload, keep_unknown):
    """What `decode_payload` gives for one payload, in comparable form."""
    try:
        return _comparable(decode_payload(cls, payload, allow_unknown_fields=keep_unknown))
    except CodecError as exc:
        return _comparable(exc)


def _comparable(result):
    if isinstance(result, CodecError):
        return ("error", type(result).__name__, str(result), result.message_type)
    return ("message", type(result), result.SerializeToString(deterministic=True))


def _sliced(cls, head, batch_payloads, keep_unknown):
    """`decode_sliced` over the payloads behind `head`, in comparable form."""
    got, clean = decode_sliced(cls, [head + p for p in batch_payloads], len(head), keep_unknown)
    assert len(got) == len(batch_payloads)
    if clean:  # "all decoded" is never said of a batch with an error
        assert not any(isinstance(r, CodecError) for r in got)
    return [_comparable(r) for r in got]


@given(heads, st.lists(payloads, max_size=25), st.booleans())
@settings(max_examples=300)
def test_decode_sliced_equals_decode_payload_one_by_one(head, batch_payloads, keep_unknown):
    expected = [_outcome(REC, p, keep_unknown) for p in batch_payloads]
    assert _sliced(REC, head, batch_payloads, keep_unknown) == expected


@given(heads, st.lists(strict_payloads, max_size=10), st.booleans())
def test_required_fields_are_checked_as_one_by_one(head, batch_payloads, keep_unknown):
    expected = [_outcome(STRICT2, p, keep_unknown) for p in batch_payloads]
    assert _sliced(STRICT2, head, batch_payloads, keep_unknown) == expected


@given(heads, st.lists(payloads, min_size=1, max_size=40), st.integers(1, 200), st.booleans())
def test_decode_sliced_in_small_chunks_still_equals_one_by_one(
    head, batch_payloads, chunk, keep_unknown
):
    # Tiny chunks put chunk boundaries everywhere, bad payloads on either side of them.
    real = codec_payload._CHUNK_BYTES
    codec_payload._CHUNK_BYTES = chunk
    try:
        got = _sliced(REC, head, batch_payloads, keep_unknown)
    finally:
        codec_payload._CHUNK_BYTES = real
    assert got == [_outcome(REC, p, keep_unknown) for p in batch_payloads]


@pytest.mark.parametrize("equality_first", [True, False], ids=["equality", "size"])
@given(st.lists(payloads, min_size=2, max_size=20))
def test_both_unknown_field_tests_agree_with_one_by_one(equality_first, batch_payloads):
    # a clean wrapper is checked by re-encoding it (exact when the bytes match) or by size
    # (always exact); both must find exactly the payloads decode_payload rejects.
    facts = codec_payload._facts_of(REC)
    facts.equality_pays = equality_first
    try:
        got = _sliced(REC, HEAD, batch_payloads, False)
    finally:
        facts.equality_pays = True
    assert got == [_outcome(REC, p, False) for p in batch_payloads]


def test_a_valid_but_not_canonical_batch_switches_the_type_to_the_size_test():
    facts = codec_payload._facts_of(LEAF)
    facts.equality_pays = True
    canonical = [LEAF(s=f"s{i}", z=i).SerializeToString() for i in range(5)]
    assert [r[0] for r in _sliced(LEAF, HEAD, canonical, False)] == ["message"] * 5
    assert facts.equality_pays is True
    # `s` written twice: valid protobuf (the last one wins), but it re-encodes shorter
    twice = [b"\x0a\x01a\x0a\x01b"] * 3
    got = decode_sliced(LEAF, [HEAD + p for p in twice], len(HEAD), False)[0]
    assert [r.s for r in got] == ["b", "b", "b"]
    assert facts.equality_pays is False
    # and the size test still finds unknown fields
    got = decode_sliced(LEAF, [HEAD + p for p in [*canonical, b"\xa2\x06\x01x"]], len(HEAD), False)[
        0
    ]
    assert type(got[-1]).__name__ == "UnknownFields"
    facts.equality_pays = True


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
        results = decode_payloads(REC, [good, HIDDEN_UNKNOWN, good])
        sliced = decode_sliced(REC, [HEAD + p for p in (good, HIDDEN_UNKNOWN)], len(HEAD), False)
    finally:
        facts.equality_pays = True
    assert [type(r).__name__ for r in results] == ["Rec", "UnknownFields", "Rec"]
    assert str(results[1]) == "payload has 6 bytes of fields that many.Rec does not define"
    assert [type(r).__name__ for r in sliced[0]] == ["Rec", "UnknownFields"]


def _registry_with(schema_text):
    registry = MemoryRegistry()
    registry.add(1, RegisteredSchema(schema_text))
    return Decoder(registry), Decoder(registry, allow_unknown_fields=True)


def _class_of(decoder, index):
    return decoder.resolver.resolve_id(1).message_class_for((index,))


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
        base = _class_of(decoder, 0)
        got = decode_sliced(base, [good, bad], 6, decoder.allow_unknown_fields)[0]
        assert [type(r).__name__ for r in got] == ["Base", "BadPayload"]


def test_a_required_field_behind_a_map_key_that_is_not_utf8_is_bad_payload():
    strict, _ = _registry_with(
        'syntax = "proto2"; package manymap;'
        " message Req { required int32 x = 1; } message M { map<string, Req> m = 1; }"
    )
    value = write_frame(1, [1], b"\x0a\x05\x0a\x01\xff\x12\x00")  # key b"\xff", x missing
    with pytest.raises(CodecError, match="m\\[a key that is not UTF-8\\]") as info:
        strict.decode(value)
    assert info.value.code == "BAD_PAYLOAD"
    got = decode_sliced(_class_of(strict, 1), [value, value], 6, False)[0]
    assert [r.code for r in got] == ["BAD_PAYLOAD"] * 2


def test_payloads_may_be_any_buffers_in_any_sequence():
    raw = REC(name="abc", xs=[1]).SerializeToString()
    assert len(raw) % 2 == 0
    items = memoryview(raw).cast("H")  # len() counts 2-byte items, not bytes
    expected = decode_payload(REC, raw)
    got = decode_payloads(REC, [items, bytearray(raw), raw])
    assert [m.SerializeToString() for m in got] == [expected.SerializeToString()] * 3
    real = codec_payload._CHUNK_BYTES
    codec_payload._CHUNK_BYTES = 10  # several chunks: the sequence is sliced
    try:
        got = decode_sliced(REC, deque([HEAD + raw] * 5), len(HEAD), False)[0]
    finally:
        codec_payload._CHUNK_BYTES = real
    assert [r.name for r in got] == ["abc"] * 5


@pytest.mark.parametrize("depth", [1, 61, 62, 63, 64, 80, 99])
def test_unknown_fields_are_found_at_any_depth_protobuf_parses(depth):
    # upb's DiscardUnknownFields stops 62 levels down; parsing goes to 100 (codec.depth)
    from codec.payload import has_unknown_fields
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
        sliced = decode_sliced(node, [HEAD + p for p in (clean, bad)], len(HEAD), False)[0]
        assert [type(r).__name__ for r in sliced] == ["N", "UnknownFields"]
        kept = keeping.decode(write_frame(1, [0], bad))
        assert kept.has_unknown_fields and has_unknown_fields(kept.message)
        assert kept.message.SerializeToString() == bad  # kept, and re-encoded as it came
    assert not keeping.decode(write_frame(1, [0], clean)).has_unknown_fields


def test_unknown_fields_at_the_bottom_of_a_62_level_chain_are_found_in_a_batch():
    # no recursion: M0 -> M1 -> ... -> M62, exactly as deep as DiscardUnknownFields reaches
    # alone; the batch path's wrapper adds a level, which the discard then does not reach
    from codec.varint import write_uvarint64

    chain = " ".join(f"message M{i} {{ M{i + 1} c = 1; }}" for i in range(62))
    strict, _ = _registry_with(f'syntax = "proto3"; package chain62; {chain} message M62 {{}}')
    top = strict.resolver.resolve_id(1).message_class_for((0,))
    payload = b"\xa2\x06\x01x"  # field 100, in M62
    for _ in range(62):
        payload = b"\x0a" + write_uvarint64(len(payload)) + payload
    with pytest.raises(CodecError) as info:
        decode_payload(top, payload)
    assert info.value.code == "UNKNOWN_FIELDS"
    got = decode_payloads(top, [payload, payload])
    assert [type(r).__name__ for r in got] == ["UnknownFields", "UnknownFields"]
    sliced = decode_sliced(top, [HEAD + payload] * 2, len(HEAD), False)[0]
    assert [type(r).__name__ for r in sliced] == ["UnknownFields", "UnknownFields"]
