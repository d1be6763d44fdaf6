"""Property tests: round trips, and "any bytes decode or raise a CodecError leaf"."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import codec.payload as codec_payload
from codec import (
    REASON_CODES,
    CodecError,
    Decoder,
    RegisteredSchema,
    decode_payload,
    decode_payloads,
    parse_frame,
    write_frame,
)
from codec.errors import ERROR_CLASSES, RegistryUnavailable
from codec.framing import VALUE_SCHEMA_ID_HEADER, read_message_indexes, write_message_indexes
from codec.varint import (
    read_uvarint64,
    read_varint32,
    read_varint64,
    write_uvarint64,
    write_varint32,
    write_varint64,
)
from tests.support.codec_test_support import MemoryRegistry

SCHEMA = textwrap.dedent(
    """\
    syntax = "proto3";
    package prop;
    message Leaf { string s = 1; sint64 z = 2; }
    message Rec {
      string name = 1;
      int64 n = 2;
      double d = 3;
      bytes b = 4;
      repeated int32 xs = 5;
      Leaf leaf = 6;
      map<string, Leaf> m = 7;
      message Nested { bool flag = 1; }
      Nested nested = 8;
    }
    """
)
GUID = "0f8fad5b-d9cb-469f-a165-70867728950e"

_registry = MemoryRegistry()
_registry.add(1, RegisteredSchema(SCHEMA), guid=GUID)
_registry.add(2, RegisteredSchema('{"type": "int"}', schema_type="AVRO"))
_registry.add(3, RegisteredSchema('syntax = "proto3"; message Broken { Nope x = 1; }'))
DECODER = Decoder(_registry)
KEEPING = Decoder(_registry, allow_unknown_fields=True)
REC = DECODER.resolver.resolve_id(1).message_class_for((1,))

settings.register_profile("codec", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("codec")


@given(st.integers(0, 2**64 - 1))
def test_uvarint64_round_trip(value):
    raw = write_uvarint64(value)
    assert read_uvarint64(raw) == (value, len(raw))


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint32_round_trip(value):
    raw = write_varint32(value)
    assert read_varint32(raw) == (value, len(raw))
    assert read_varint64(raw) == (value, len(raw))  # same zigzag bytes at both widths


@given(st.integers(-(2**63), 2**63 - 1))
def test_varint64_round_trip(value):
    raw = write_varint64(value)
    assert read_varint64(raw) == (value, len(raw))


indexes = st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=8)


@given(st.one_of(st.integers(0, 2**32 - 1), st.uuids().map(str)), indexes, st.binary(max_size=64))
def test_frame_round_trip(schema, idx, payload):
    value = write_frame(schema, idx, payload)
    frame = parse_frame(value)
    assert frame.schema_key == schema
    assert frame.message_indexes == tuple(idx)
    assert value[frame.payload_offset :] == payload
    assert read_message_indexes(write_message_indexes(idx), 0)[0] == tuple(idx)


leaf = st.fixed_dictionaries({"s": st.text(max_size=20), "z": st.integers(-(2**63), 2**63 - 1)})
records = st.fixed_dictionaries(
    {
        "name": st.text(max_size=30),
        "n": st.integers(-(2**63), 2**63 - 1),
        "d": st.floats(allow_nan=False),
        "b": st.binary(max_size=30),
        "xs": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=5),
        "leaf": leaf,
        "m": st.dictionaries(st.text(max_size=5), leaf, max_size=3),
        "nested": st.fixed_dictionaries({"flag": st.booleans()}),
    }
)


@given(records, st.booleans())
def test_message_round_trip(fields, by_guid):
    message = REC(**fields)
    payload = message.SerializeToString()
    if by_guid:
        header = write_frame(GUID, [1])
        record = DECODER.decode(payload, [(VALUE_SCHEMA_ID_HEADER, header)])
    else:
        record = DECODER.decode(write_frame(1, [1], payload))
    assert record.message_type == "prop.Rec"
    assert record.message.SerializeToString(deterministic=True) == message.SerializeToString(
        deterministic=True
    )


def _check(decoder, value, headers):
    try:
        decoder.decode(value, headers)
    except CodecError as exc:
        assert type(exc) in ERROR_CLASSES
        assert type(exc) is not RegistryUnavailable
        assert exc.code in REASON_CODES
        assert exc.record_fault is True
        assert exc.stage in ("framing", "registry", "schema", "payload")
        assert isinstance(exc.message, str) and exc.message


framed = st.builds(
    lambda magic_id, idx_bytes, payload: (
        b"\x00" + magic_id.to_bytes(4, "big") + idx_bytes + payload
    ),
    st.sampled_from([1, 1, 1, 2, 3, 404]),
    st.one_of(
        st.binary(max_size=12),
        st.lists(st.integers(0, 3), max_size=3).map(
            lambda xs: write_message_indexes(xs) if xs else b"\x00"
        ),
    ),
    st.binary(max_size=80),
)
header_values = st.one_of(
    st.none(),
    st.binary(max_size=24),
    st.builds(lambda i: write_frame(GUID, i), st.lists(st.integers(0, 3), min_size=1, max_size=3)),
)
headers = st.lists(
    st.tuples(st.sampled_from([VALUE_SCHEMA_ID_HEADER, "__key_schema_id", "x"]), header_values),
    max_size=3,
)


@given(st.one_of(st.none(), st.binary(max_size=100), framed), headers)
@settings(max_examples=600)
@pytest.mark.parametrize("decoder", [DECODER, KEEPING], ids=["strict", "keep-unknown"])
def test_any_bytes_decode_or_raise_a_codec_error_leaf(decoder, value, headers):
    _check(decoder, value, headers)


@given(records, st.binary(max_size=40), st.integers(0, 60))
def test_mutated_real_payloads_decode_or_raise_a_codec_error_leaf(fields, noise, cut):
    payload = REC(**fields).SerializeToString()
    for mutated in (payload[:cut], payload + noise, noise + payload, payload[cut:]):
        _check(DECODER, write_frame(1, [1], mutated), None)


# --- decode_payloads (one protobuf parse per batch) must equal decode_payload per payload ---

_good_payloads = records.map(lambda fields: REC(**fields).SerializeToString())
_unknown_field = st.binary(min_size=1, max_size=6).map(lambda b: b"\xa2\x06" + bytes([len(b)]) + b)
_payloads = st.one_of(
    _good_payloads,
    st.builds(lambda p, u: p + u, _good_payloads, _unknown_field),  # field 100: not in Rec
    st.binary(max_size=24),  # mostly malformed
    st.just(b"\x0a\x02\xff\xfe"),  # invalid UTF-8 in `name`
    st.just(b""),
)


def _outcome(result):
    if isinstance(result, CodecError):
        return ("error", type(result).__name__, str(result))
    return ("message", result.SerializeToString(deterministic=True))


def _one_by_one(payloads, allow_unknown):
    """The outcomes of `decode_payload` called on each payload."""
    out = []
    for payload in payloads:
        try:
            out.append(decode_payload(REC, payload, allow_unknown_fields=allow_unknown))
        except CodecError as exc:
            out.append(exc)
    return [_outcome(r) for r in out]


def _count_slow_path_calls(monkeypatch):
    """A list that grows by one on every per-payload `decode_payload` call."""
    calls = []
    real = codec_payload.decode_payload

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(codec_payload, "decode_payload", counting)
    return calls


@given(st.lists(_payloads, max_size=12), st.booleans())
def test_decode_payloads_equals_decode_payload_one_by_one(payloads, allow_unknown):
    got = decode_payloads(REC, payloads, allow_unknown_fields=allow_unknown)
    assert [_outcome(r) for r in got] == _one_by_one(payloads, allow_unknown)
    for result in got:
        if not isinstance(result, CodecError):
            assert type(result) is REC


def test_decode_payloads_takes_one_parse_for_a_clean_batch(monkeypatch):
    # sizes from 2 bytes to 20 kB: the length prefixes take one to three bytes
    payloads = [REC(name=f"r{i}" * (i * i), n=i).SerializeToString() for i in range(50)]
    calls = _count_slow_path_calls(monkeypatch)
    got = decode_payloads(REC, payloads)
    assert [m.name for m in got] == [f"r{i}" * (i * i) for i in range(50)] and calls == []
    # one payload with an unknown field: the batch is re-read payload by payload to find it
    got = decode_payloads(REC, [*payloads[:3], payloads[3] + b"\xa2\x06\x01x"])
    assert len(calls) == 4 and [type(r).__name__ for r in got][-1] == "UnknownFields"


@given(st.lists(_payloads, max_size=30), st.booleans(), st.integers(1, 64))
def test_decode_payloads_in_small_chunks_still_equals_one_by_one(payloads, allow_unknown, chunk):
    # Tiny chunks put chunk boundaries everywhere, bad payloads on either side of them.
    real = codec_payload._CHUNK_BYTES
    codec_payload._CHUNK_BYTES = chunk
    try:
        got = decode_payloads(REC, payloads, allow_unknown_fields=allow_unknown)
    finally:
        codec_payload._CHUNK_BYTES = real
    assert [_outcome(r) for r in got] == _one_by_one(payloads, allow_unknown)


def test_a_bad_payload_sends_only_its_own_chunk_to_the_slow_path(monkeypatch):
    payloads = [REC(name="x" * 1000, n=i).SerializeToString() for i in range(300)]  # ~300 kB
    payloads[150] = b"\x0a\x02\xff\xfe"  # invalid UTF-8: protobuf rejects the whole wrapper
    calls = _count_slow_path_calls(monkeypatch)
    got = decode_payloads(REC, payloads)
    assert [type(r).__name__ for r in got].count("BadPayload") == 1
    assert type(got[150]).__name__ == "BadPayload"
    assert [r.n for i, r in enumerate(got) if i != 150] == [i for i in range(300) if i != 150]
    per_chunk = -(-codec_payload._CHUNK_BYTES // min(map(len, payloads[:150])))  # ceil
    assert 0 < len(calls) <= per_chunk + 1 < len(payloads) // 3  # one chunk re-read, not all
