"""The compiled decoder (wire2arrow.c) against the upb path: same rows, or the record given back.

The oracle is what silver does without it: ``codec.decode_payloads`` (strict) then
``RowConverter.to_record_batch``. For any payload, the native decoder either gives the record
back or produces exactly the oracle's row (map entries compared as sets: protobuf maps have
no order). It must never accept a payload the oracle rejects.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codec import CodecError, decode_payloads
from codec.varint import write_uvarint64 as _varint
from pipelines.proto_types import RowConversionError, RowConverter, native_decoder
from pipelines.proto_types._library import library
from tests.support.proto_types_testkit import Protos, compile_protos

FD = FieldDescriptor
ROOT = Path(__file__).resolve().parents[3]

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NATIVE_TYPES = [
    "protolake.test.v3.Scalars",
    "protolake.test.v3.OptionalScalars",
    "protolake.test.v3.Repeated",
    "protolake.test.v3.Maps",
    "protolake.test.v3.Choice",
    "protolake.test.v3.Point",
    "protolake.test.ed.Feature",
    "protolake.test.native.Timing",
    "protolake.test.native2.Stock",
]


@pytest.fixture(scope="module")
def protos(tmp_path_factory: pytest.TempPathFactory) -> Protos:
    return Protos(
        compile_protos(
            tmp_path_factory.mktemp("native"),
            "types3.proto",
            "types2.proto",
            "editions.proto",
            "native3.proto",
            "native2.proto",
        )
    )


@pytest.fixture(scope="module")
def lib() -> Any:
    found = library()
    assert found is not None, "the C decoder did not build: is a C compiler installed?"
    return found


def _normal(value: Any) -> Any:
    """Rows comparable with ==: floats by repr (nan, -0.0), maps as sorted entry lists."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_normal(v) for v in value]
        if items and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return sorted(items, key=repr)  # a map's (key, value) entries
        return items
    if isinstance(value, tuple):
        return tuple(_normal(v) for v in value)
    return value


def _plain_type(t: pa.DataType) -> pa.DataType:
    """``t`` with timestamps as int64 microseconds: any int64 is a valid Arrow timestamp, not
    every one is a Python datetime."""
    if pa.types.is_timestamp(t):
        return pa.int64()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_plain_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_plain_type(t.key_type), _plain_type(t.item_type))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_plain_type(t.value_type)))
    return t


def _rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    columns = [c.cast(_plain_type(c.type)) for c in batch.columns]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names).to_pylist()


def _decode(desc: Descriptor, payloads: list[bytes]) -> tuple[list[Any], list[int]]:
    conv = RowConverter(desc, 3)
    decoder = native_decoder(desc, conv.arrow_schema, 3)
    assert decoder is not None
    values = pa.array(payloads, pa.binary())
    starts = pa.array([0] * len(payloads), pa.int32())
    batch, given_back = decoder.decode(values, starts)
    assert batch.schema == conv.arrow_schema
    return _rows(batch), given_back


def _oracle(protos: Any, desc: Descriptor, payload: bytes) -> dict[str, Any] | None:
    """The upb path's row for one payload, or None when it does not make a row."""
    cls = protos.cls(desc.full_name)
    result = decode_payloads(cls, [payload])[0]
    if isinstance(result, CodecError):
        return None
    try:
        return _rows(RowConverter(desc, 3).to_record_batch([result]))[0]
    except RowConversionError:
        return None


def _check_against_oracle(protos: Any, desc: Descriptor, payloads: list[bytes]) -> list[int]:
    rows, given_back = _decode(desc, payloads)
    kept = iter(rows)
    for i, payload in enumerate(payloads):
        expected = _oracle(protos, desc, payload)
        if i in given_back:
            continue
        assert expected is not None, f"native accepted {payload.hex()}, upb rejects it"
        assert _normal(next(kept)) == _normal(expected), payload.hex()
    return given_back


# ------------------------------------------------------------------ random valid messages

_INT_RANGES = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FD.TYPE_INT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1),
    FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1),
    FD.TYPE_FIXED64: (0, 2**64 - 1),
}


def _scalar(draw: Any, field: FieldDescriptor) -> Any:
    t = field.type
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return draw(
            st.one_of(st.sampled_from([lo, hi, 0, 1, -1 if lo < 0 else 2]), st.integers(lo, hi))
        )
    if t == FD.TYPE_DOUBLE:
        return draw(st.floats(allow_nan=True, allow_infinity=True))
    if t == FD.TYPE_FLOAT:
        return draw(st.floats(width=32, allow_nan=True, allow_infinity=True))
    if t == FD.TYPE_BOOL:
        return draw(st.booleans())
    if t == FD.TYPE_STRING:
        return draw(st.text(max_size=6))
    if t == FD.TYPE_BYTES:
        return draw(st.binary(max_size=6))
    if t == FD.TYPE_ENUM:
        known = [v.number for v in field.enum_type.values]
        if field.enum_type.is_closed:  # protobuf refuses unknown numbers for closed enums
            return draw(st.sampled_from(known))
        return draw(st.one_of(st.sampled_from(known), st.integers(-5, 2**31 - 1)))
    raise AssertionError(field.type)


def _fill_special(draw: Any, sub: Any) -> bool:
    """Fill a Timestamp, Duration or wrapper with a value; False for other messages."""
    name = sub.DESCRIPTOR.full_name
    if name == "google.protobuf.Timestamp":
        sub.seconds = draw(st.integers(-(2**35), 2**35))
        sub.nanos = draw(st.integers(0, 999_999_999))
    elif name == "google.protobuf.Duration":
        # within 2^53 ns (about 104 days): longer ones are given back by design (see
        # test_durations_are_exact_or_given_back)
        sub.seconds = draw(st.integers(-9_000_000, 9_000_000))
        nanos = draw(st.integers(0, 999_999_999))
        sub.nanos = -nanos if sub.seconds < 0 else nanos
    elif name.startswith("google.protobuf.") and name.endswith("Value"):
        if draw(st.booleans()):  # an unset value is the wrapper's default, still set
            sub.value = _scalar(draw, sub.DESCRIPTOR.fields_by_name["value"])
    else:
        return False
    return True


def _fill(draw: Any, message: Any, depth: int = 0) -> None:
    for field in message.DESCRIPTOR.fields:
        if not field.is_required and not draw(st.booleans()):
            continue
        is_message = field.type == FD.TYPE_MESSAGE
        if field.is_repeated and is_message and field.message_type.GetOptions().map_entry:
            key_f = field.message_type.fields_by_name["key"]
            val_f = field.message_type.fields_by_name["value"]
            container = getattr(message, field.name)
            for _ in range(draw(st.integers(0, 3))):
                key = _scalar(draw, key_f)
                if val_f.type == FD.TYPE_MESSAGE:
                    sub = container[key]
                    if not _fill_special(draw, sub) and depth < 2:
                        _fill(draw, sub, depth + 1)
                else:
                    container[key] = _scalar(draw, val_f)
        elif field.is_repeated:
            container = getattr(message, field.name)
            for _ in range(draw(st.integers(0, 3))):
                if is_message:
                    sub = container.add()
                    if not _fill_special(draw, sub) and depth < 2:
                        _fill(draw, sub, depth + 1)
                else:
                    container.append(_scalar(draw, field))
        elif is_message:
            sub = getattr(message, field.name)
            sub.SetInParent()
            if not _fill_special(draw, sub) and depth < 2:
                _fill(draw, sub, depth + 1)
        else:
            setattr(message, field.name, _scalar(draw, field))


@st.composite
def messages(draw: Any, cls: type) -> Any:
    message = cls()
    _fill(draw, message)
    return message


@pytest.mark.parametrize("name", NATIVE_TYPES)
def test_random_messages_decode_as_the_upb_path_does(protos: Any, lib: Any, name: str) -> None:
    cls = protos.cls(name)

    @PROPERTY
    @given(st.lists(messages(cls), min_size=1, max_size=8))
    def check(batch: list[Any]) -> None:
        payloads = [m.SerializeToString() for m in batch]
        given_back = _check_against_oracle(protos, cls.DESCRIPTOR, payloads)
        # protobuf's own serializer writes canonical bytes: nothing is given back, except
        # strings it let through that are not UTF-8 (never, from Python str) or maps written
        # twice under one key (never, from a map container)
        assert given_back == []

    check()


@pytest.mark.parametrize("name", NATIVE_TYPES)
def test_mutated_payloads_never_disagree_with_upb(protos: Any, lib: Any, name: str) -> None:
    cls = protos.cls(name)

    @PROPERTY
    @given(
        messages(cls),
        st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
        st.binary(max_size=8),
    )
    def check(message: Any, edits: list[tuple[int, int]], tail: bytes) -> None:
        raw = bytearray(message.SerializeToString())
        for at, byte in edits:
            if raw:
                raw[at % len(raw)] = byte
        payloads = [bytes(raw), bytes(raw) + tail, tail]
        _check_against_oracle(protos, cls.DESCRIPTOR, payloads)

    check()


# ------------------------------------------------------------------ given back, precisely


def _tag(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _ld(number: int, body: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(body)) + body


def test_what_the_upb_path_must_decide_is_given_back(protos: Any, lib: Any) -> None:
    point = protos.descriptor("protolake.test.v3.Point")
    good = _tag(1, 0) + _varint(5)
    origin = _ld(3, _ld(1, b"src"))
    cases = {
        "unknown field": good + _tag(9, 0) + _varint(1),
        "wrong wire type": _tag(1, 2) + _varint(1) + b"x",
        "message written twice (protobuf merges)": origin + origin,
        "truncated varint": _tag(1, 0) + b"\x80",
        "length past the end": _tag(3, 2) + _varint(50) + b"ab",
        "bad UTF-8 in a proto3 string": _ld(3, _ld(1, b"\xc3\x28")),
        "field number 0": _tag(0, 0) + _varint(1),
        "varint of 11 bytes": _tag(1, 0) + b"\xff" * 10 + b"\x01",
        "group wire type": _tag(1, 3) + _tag(1, 4),
    }
    payloads = [good, *cases.values(), origin]
    rows, given_back = _decode(point, payloads)
    assert given_back == list(range(1, len(cases) + 1))
    assert [r["x"] for r in rows] == [5, 0]
    assert rows[1]["origin"] == {"source": "src"}


def test_overlong_tags_and_lengths_are_given_back(protos: Any, lib: Any) -> None:
    # upb reads a tag or a length as at most 5 bytes (a tag at most 2^32 - 1): it rejects
    # longer encodings, even of small values, so the compiled decoder must not take them
    point = protos.descriptor("protolake.test.v3.Point")
    six_byte_tag_1 = b"\x88\x80\x80\x80\x80\x00"  # field 1, varint: 0x08 in 6 bytes
    origin = _ld(1, b"src")
    cases = [
        six_byte_tag_1 + _varint(5),
        _tag(3, 2) + b"\x85\x80\x80\x80\x80\x00" + origin,  # length 5 in 6 bytes
        _tag(3, 2) + _varint(1) + _tag(1, 2) + b"\x81\x80\x80\x80\x80\x00" + b"s",
        _varint(2**32 + (1 << 3)) + _varint(5),  # a tag past 2^32: field 1 modulo 2^32
    ]
    assert [_oracle(protos, point, p) for p in cases] == [None] * len(cases)
    good = [_tag(1, 0) + _varint(5), _tag(3, 2) + b"\x85\x80\x80\x80\x00" + origin]
    assert _check_against_oracle(protos, point, [*cases, *good]) == [0, 1, 2, 3]
    rows, _ = _decode(point, good)
    assert [r["x"] for r in rows] == [5, 0] and rows[1]["origin"] == {"source": "src"}


def test_strings_written_twice_in_wrappers_and_map_entries_are_given_back(
    protos: Any, lib: Any
) -> None:
    # protobuf checks the UTF-8 of every copy of a string, the one a later copy replaces too
    timing = protos.descriptor("protolake.test.native.Timing")
    maps = protos.descriptor("protolake.test.v3.Maps")
    bad = b"\xff"
    wrapper_twice = _ld(13, _ld(1, bad) + _ld(1, b"a"))
    key_twice = _ld(1, _ld(1, bad) + _ld(1, b"a") + _tag(2, 0) + _varint(1))
    value_twice = _ld(2, _tag(1, 0) + _varint(1) + _ld(2, bad) + _ld(2, b"b"))
    assert _oracle(protos, timing, wrapper_twice) is None
    assert [_oracle(protos, maps, p) for p in (key_twice, value_twice)] == [None, None]
    assert _check_against_oracle(protos, timing, [wrapper_twice, _ld(13, _ld(1, b"a"))]) == [0]
    good_entry = _ld(2, _tag(1, 0) + _varint(1) + _ld(2, b"b"))
    assert _check_against_oracle(protos, maps, [key_twice, value_twice, good_entry]) == [0, 1]


def test_a_repeated_map_key_is_given_back(protos: Any, lib: Any) -> None:
    maps = protos.descriptor("protolake.test.v3.Maps")
    entry_a1 = _ld(1, _ld(1, b"a") + _tag(2, 0) + _varint(1))
    entry_a2 = _ld(1, _ld(1, b"a") + _tag(2, 0) + _varint(2))
    entry_b = _ld(1, _ld(1, b"b") + _tag(2, 0) + _varint(3))
    rows, given_back = _decode(maps, [entry_a1 + entry_b, entry_a1 + entry_a2, entry_b])
    assert given_back == [1]
    assert [r["str_to_long"] for r in rows] == [[("a", 1), ("b", 3)], [("b", 3)]]
    # upb keeps the last value for a repeated key: the upb path has the final say
    assert _oracle(protos, maps, entry_a1 + entry_a2)["str_to_long"] == [("a", 2)]


def test_packed_and_unpacked_repeated_both_read(protos: Any, lib: Any) -> None:
    rep = protos.descriptor("protolake.test.v3.Repeated")
    packed = _ld(1, _varint(1) + _varint(2))
    unpacked = _tag(1, 0) + _varint(3) + _tag(1, 0) + _varint(2**64 - 1)
    payload = packed + unpacked
    assert _check_against_oracle(protos, rep, [payload]) == []
    assert _decode(rep, [payload])[0][0]["r_int32"] == [1, 2, 3, -1]


def test_oneof_keeps_the_last_member_written(protos: Any, lib: Any) -> None:
    choice = protos.descriptor("protolake.test.v3.Choice")
    payload = (
        _tag(2, 0)
        + _varint(7)
        + _ld(3, b"text")
        + _tag(7, 0)
        + _varint(1)
        + _tag(6, 0)
        + _varint(1)
    )
    assert _check_against_oracle(protos, choice, [payload]) == []
    row = _decode(choice, [payload])[0][0]
    assert (row["payload_case"], row["number"], row["text"]) == ("text", None, "text")
    assert (row["kind_case_"], row["flag"], row["color"]) == ("flag", True, None)


def test_strings_and_messages_protobuf_replaced_are_given_back(protos: Any, lib: Any) -> None:
    # protobuf parses, and checks, what a later field replaces: so must the upb path decide
    choice = protos.descriptor("protolake.test.v3.Choice")
    bad = b"\xc3\x28"  # not UTF-8
    number = _tag(2, 0) + _varint(7)
    cases = {
        "a string written twice, the first not UTF-8": _ld(5, bad) + _ld(5, b"ok"),
        "a oneof string replaced, not UTF-8": _ld(3, bad) + number,
        "a oneof message replaced, a string in it not UTF-8": _ld(4, _ld(3, _ld(1, bad))) + number,
    }
    payloads = [*cases.values(), number + _ld(3, b"ok")]  # a number replaced: decoded here
    assert [_oracle(protos, choice, p) is None for p in payloads] == [True, True, True, False]
    assert _check_against_oracle(protos, choice, payloads) == [0, 1, 2]


@pytest.mark.parametrize(
    "name",
    [
        "protolake.test.v3.WellKnown",  # Struct/Value/Any/Empty: JSON text
        "protolake.test.v3.TreeNode",  # recursion: JSON text below max_depth
        "protolake.test.v3.Shipment",  # a Struct
        "protolake.test.v2.Legacy",  # a group
    ],
)
def test_types_without_a_plan_use_the_upb_path(protos: Any, lib: Any, name: str) -> None:
    desc = protos.descriptor(name)
    assert native_decoder(desc, RowConverter(desc, 3).arrow_schema, 3) is None


def test_timestamps_out_of_range_are_given_back(protos: Any, lib: Any) -> None:
    maps = protos.descriptor("protolake.test.v3.Maps")

    def ts_entry(seconds: int, nanos: int) -> bytes:
        ts = _tag(1, 0) + _varint(seconds % 2**64) + _tag(2, 0) + _varint(nanos % 2**64)
        return _ld(7, _ld(1, b"t") + _ld(2, ts))

    payloads = [
        ts_entry(10, 999_000),
        ts_entry(-1, 500_000_000),
        ts_entry(2**62, 0),
        ts_entry(1, -1),
    ]
    given_back = _check_against_oracle(protos, maps, payloads)
    assert given_back == [2, 3]
    rows, _ = _decode(maps, payloads)
    assert [r["str_to_ts"][0][1] for r in rows] == [10_000_999, -500_000]  # microseconds


# ------------------------------------------------------------------ building the library


def _fresh_python(env: dict[str, str], tmp: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "from pipelines.proto_types._library import library\n"
        "print('LIB', library() is not None)\n"
    )
    full = {**os.environ, "PROTOLAKE_NATIVE_CACHE": str(tmp), **env}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True, text=True, check=True
    )


def test_the_library_builds_once_into_its_cache(tmp_path: Path) -> None:
    first = _fresh_python({}, tmp_path)
    assert "LIB True" in first.stdout
    built = list(tmp_path.glob("wire2arrow-*.so"))
    assert len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    again = _fresh_python({"CC": "/nonexistent/cc"}, tmp_path)  # cached: no compiler needed
    assert "LIB True" in again.stdout
    assert built[0].stat().st_mtime_ns == stamp


def test_without_a_compiler_or_when_disabled_the_upb_path_runs(tmp_path: Path) -> None:
    no_cc = _fresh_python({"CC": "/nonexistent/cc"}, tmp_path)
    assert "LIB False" in no_cc.stdout
    assert "native decoder unavailable" in no_cc.stderr
    off = _fresh_python({"PROTOLAKE_NATIVE": "0"}, tmp_path)
    assert "LIB False" in off.stdout
    assert list(tmp_path.glob("*.so")) == []


# ------------------------------------------------------------------ in the silver decode step


def test_silver_decode_gives_the_same_rows_with_and_without_it(protos: Any, lib: Any) -> None:
    from pipelines.silver.decode import DecodeSpec, decode_batches

    rep = protos.cls("protolake.test.v3.Repeated")
    point = rep(r_int32=[1, 2], r_string=["a"], r_enum=[1, 77])
    point.r_msg.add(x=3).origin.source = "o"
    good = [rep(r_int64=[i], r_bool=[i % 2 == 0]).SerializeToString() for i in range(20)]
    twice = _ld(17, _ld(3, _ld(1, b"x"))) + _ld(17, b"")  # repeated message: fine natively
    merged = _ld(17, _tag(3, 2) + b"\x00" + _tag(3, 2) + b"\x00")  # origin twice: upb merges
    unknown = point.SerializeToString() + _tag(99, 0) + _varint(1)  # UNKNOWN_FIELDS
    bad = _tag(14, 2) + _varint(2) + b"\xff\xfe"  # not UTF-8: BAD_PAYLOAD
    payloads = [point.SerializeToString(), *good, twice, merged, unknown, bad]
    prefix = b"\x00\x00\x00\x00\x07\x00"  # magic 0, schema id 7, indexes [0]
    headers_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    n = len(payloads)
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array([None] * n, pa.binary()),
            "value": pa.array([prefix + p for p in payloads], pa.binary()),
            "topic": pa.array(["t"] * n),
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
            "timestamp": pa.array([0] * n, pa.timestamp("us", tz="UTC")),
            "headers": pa.array([[]] * n, headers_type),
            "_payload_offset": pa.array([len(prefix)] * n, pa.int32()),
            "_key_schema_key": pa.array([None] * n, pa.string()),
            "_key_payload_offset": pa.array([None] * n, pa.int32()),
        }
    )

    def run(native: bool) -> dict[int, Any]:
        spec = DecodeSpec(protos.fds, "protolake.test.v3.Repeated", 3, False, {}, native=native)
        out = [row for b in decode_batches(spec, [batch]) for row in b.to_pylist()]
        assert len(out) == n
        return {row["_kafka_offset"]: _normal(row) for row in out}

    with_native, without = run(True), run(False)
    assert with_native == without
    codes = {offset: row["_decode_code"] for offset, row in with_native.items()}
    assert codes[n - 2] == "UNKNOWN_FIELDS" and codes[n - 1] == "BAD_PAYLOAD"
    assert [codes[i] for i in range(n - 2)] == [None] * (n - 2)
    assert with_native[0]["r_enum"] == ["RED", "77"]
    assert with_native[n - 3]["r_msg"] == [{"x": 0, "y": 0, "origin": {"source": ""}}]


def test_proto2_required_and_closed_enums_are_protobufs_call(protos: Any, lib: Any) -> None:
    stock = protos.descriptor("protolake.test.native2.Stock")
    base = _ld(1, b"sku-1") + _tag(2, 0) + _varint(3)  # sku, delta = zigzag(3) = -2
    cases = [
        base + _tag(3, 0) + _varint(3),  # tier GOLD: fine
        base + _tag(3, 0) + _varint(4),  # tier 4: not a Tier number (unknown field to protobuf)
        _ld(1, b"sku-2"),  # delta missing: protobuf refuses the message
        base + _tag(4, 0) + _varint(5) + _tag(4, 0) + _varint(9),  # tiers [SILVER, 9]
        base + _ld(5, _ld(1, b"lyon")),  # map value missing: left to protobuf's default
        base + _ld(7, b""),  # bin without its required code
        base + _ld(7, _ld(1, b"A1")),  # bin A1, frozen defaults... to null (presence)
    ]
    given_back = _check_against_oracle(protos, stock, cases)
    assert given_back == [1, 2, 3, 4, 5]
    rows, _ = _decode(stock, cases)
    assert [(r["delta"], r["tier"], r["reorder_at"]) for r in rows] == [
        (-2, "GOLD", None),
        (-2, None, None),  # presence: unset is null, whatever the declared default
    ]
    assert rows[1]["bin"] == {"code": "A1", "frozen": None}


def test_durations_are_exact_or_given_back(protos: Any, lib: Any) -> None:
    timing = protos.descriptor("protolake.test.native.Timing")

    def took(seconds: int, nanos: int) -> bytes:
        return _ld(1, _tag(1, 0) + _varint(seconds % 2**64) + _tag(2, 0) + _varint(nanos % 2**64))

    payloads = [took(1, 500_000_000), took(-3, -1), took(9_000_000, 1), took(10**10, 0)]
    given_back = _check_against_oracle(protos, timing, payloads)
    assert given_back == [3]  # 10^19 ns does not fit a double exactly: the upb path divides
    rows, _ = _decode(timing, payloads)
    assert [r["took"] for r in rows] == [1.5, -3.000000001, 9_000_000.000000001]


def test_wrappers_are_null_unset_and_their_value_when_set(protos: Any, lib: Any) -> None:
    timing = protos.descriptor("protolake.test.native.Timing")
    payloads = [
        b"",
        _ld(10, b"") + _ld(13, _ld(1, b"x")) + _ld(9, _tag(1, 0) + _varint(2**64 - 1)),
        _ld(12, _tag(1, 0) + _varint(1))
        + _ld(18, b"")
        + _ld(15, b"")
        + _ld(15, _tag(1, 0) + _varint(7)),
        _ld(13, _tag(2, 0) + _varint(1)),  # a StringValue with a field it does not have
    ]
    given_back = _check_against_oracle(protos, timing, payloads)
    assert given_back == [3]
    rows, _ = _decode(timing, payloads)
    picked = [
        (
            r["w_int32"],
            r["w_string"],
            r["w_uint64"],
            r["w_bool"],
            r["max_count"],
            r["limit_case"],
            r["w_list"],
        )
        for r in rows
    ]
    assert picked[0] == (None, None, None, None, None, None, [])
    assert picked[1][:3] == (0, "x", 2**64 - 1)
    assert picked[2][3:] == (True, 0, "max_count", [0, 7])


def test_timestamps_and_durations_outside_their_range_are_no_rows(protos: Any, lib: Any) -> None:
    # protobuf's JSON mapping refuses them; so does the row mapping (quarantined: BAD_PAYLOAD)
    maps = protos.descriptor("protolake.test.v3.Maps")
    timing = protos.descriptor("protolake.test.native.Timing")

    def ts_entry(seconds: int, nanos: int) -> bytes:
        ts = _tag(1, 0) + _varint(seconds % 2**64) + _tag(2, 0) + _varint(nanos % 2**64)
        return _ld(7, _ld(1, b"t") + _ld(2, ts))

    def took(seconds: int, nanos: int) -> bytes:
        return _ld(1, _tag(1, 0) + _varint(seconds % 2**64) + _tag(2, 0) + _varint(nanos % 2**64))

    stamps = [
        ts_entry(253_402_300_799, 999_999_999),  # 9999-12-31T23:59:59.999999999Z
        ts_entry(-62_135_596_800, 0),  # 0001-01-01T00:00:00Z
        ts_entry(253_402_300_800, 0),  # year 10000
        ts_entry(-62_135_596_801, 0),
        ts_entry(0, 1_500_000_000),
    ]
    durations = [
        took(-2, -5),
        took(1, -5),  # signs that differ
        took(-1, 5),
        took(0, 1_000_000_000),
    ]
    assert [_oracle(protos, maps, p) is None for p in stamps] == [False, False, True, True, True]
    assert [_oracle(protos, timing, p) is None for p in durations] == [False, True, True, True]
    assert _check_against_oracle(protos, maps, stamps) == [2, 3, 4]
    assert _check_against_oracle(protos, timing, durations) == [1, 2, 3]
