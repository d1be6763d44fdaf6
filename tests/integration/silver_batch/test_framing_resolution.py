"""Framing columns (frame heads cut in the JVM and read by codec.parse_frame on the driver,
Python framing for the rest) and driver-side resolution, on frames from confluent-kafka's
serializer and on drawn records."""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codec import (
    RegistryUnavailable,
    SchemaKey,
    SchemaResolver,
    open_registry,
    parse_frame,
    write_frame,
)
from codec.framing import write_message_indexes
from lakehouse.bronze_columns import RECORD_COLUMNS
from pipelines.silver.frame_heads import head_counts
from pipelines.silver.framing import FRAMED_FIELDS, VERSION, Heads, schema_key_of
from pipelines.silver.record_framing import _frame_batches, frame_columns, python_framed
from pipelines.silver.resolution import resolve_schema_key, resolve_schema_keys
from tests.support.silver_testkit import make_order


def test_schema_key_is_typed_and_ordered() -> None:
    guid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert parse_frame(write_frame(42, (0, 1))).key == SchemaKey(42, None, (0, 1))
    assert parse_frame(write_frame(guid, (2,))).key == SchemaKey(None, guid, (2,))
    assert str(SchemaKey(42, None, (0, 1))) == "id:42|0.1"
    keys = [SchemaKey(None, guid, (0,)), SchemaKey(42, None, (1,)), SchemaKey(7, None, (0,))]
    assert sorted(keys, key=SchemaKey.sort_order) == [keys[2], keys[1], keys[0]]
    with pytest.raises(ValueError):
        SchemaKey(None, None, (0,))


def test_frame_columns_of_real_frames(producer: Any, versions: Any) -> None:
    v1 = versions["v1"]
    value = producer.frame(make_order(v1, 1), "fr.orders")
    item = producer.frame(v1.LineItem(sku="x", quantity=1), "fr.items")
    magic, sid, guid, idx, off, key, code, stage, reason, kkey, koff = frame_columns(
        value, None, None
    )
    assert (magic, guid, idx, code, kkey, koff) == (0, None, [0], None, None, None)
    assert key == SchemaKey(sid, None, (0,)) and off == 6
    cols = frame_columns(item, None, None)
    # LineItem comes after the map's synthetic entry: nested message 1 of Order.
    assert cols[3] == [0, 1] and cols[5].message_indexes == (0, 1)


def test_framed_key_is_recognised_and_plain_key_is_not(producer: Any, versions: Any) -> None:
    v1 = versions["v1"]
    value = producer.frame(make_order(v1, 2), "fr.keyed")
    key = producer.frame(v1.Ping(id="k-2"), "fr.keyed", is_key=True)
    cols = frame_columns(value, key, None)
    assert cols[9] is not None and cols[9].message_indexes == (1,) and cols[10] == 7  # 02 02
    plain = frame_columns(value, b"order-2", None)
    assert plain[9] is None and plain[10] is None and plain[6] is None


@pytest.mark.parametrize(
    "value,code",
    [
        (None, "EMPTY_VALUE"),
        (b"", "EMPTY_VALUE"),
        (b"\x07\x00\x00\x00\x01\x00", "BAD_MAGIC"),
        (b'{"a": 1}', "BAD_MAGIC"),
        (b"\x00\x00\x00", "TRUNCATED"),
        (b"\x00\x00\x00\x00\x01\x01", "BAD_INDEXES"),
    ],
)
def test_bad_framing_gives_the_codec_code(value: bytes | None, code: str) -> None:
    cols = frame_columns(value, None, None)
    assert cols[6] == code and cols[7] == "framing" and cols[8]
    assert cols[5] is None


def test_header_form(producer: Any, versions: Any) -> None:
    value = producer.frame(make_order(versions["v1"], 3), "fr.hdr")
    header = value[:6]  # 00 | id | [0]
    cols = frame_columns(value[6:], None, [("__value_schema_id", header)])
    sid = struct.unpack(">I", value[1:5])[0]
    assert cols[6] is None and cols[4] == 0 and cols[5] == SchemaKey(sid, None, (0,))


def test_resolution_once_per_schema_and_faults(registry: Any, producer: Any, versions: Any) -> None:
    v1 = versions["v1"]
    value = producer.frame(make_order(v1, 4), "fr.res")
    sid = struct.unpack(">I", value[1:5])[0]
    resolver = SchemaResolver(open_registry(registry.url))
    before = len(registry.requests)
    order, item, ping, nine = (SchemaKey(sid, None, i) for i in [(0,), (0, 1), (1,), (9,)])
    unknown = SchemaKey(999999, None, (0,))
    got = resolve_schema_keys(resolver, [order, item, ping, nine, unknown])
    assert got[order].message_type == "silvertest.v1.Order"
    assert got[item].message_type == "silvertest.v1.Order.LineItem"
    assert got[ping].message_type == "silvertest.v1.Ping"
    assert got[nine].code == "UNKNOWN_MESSAGE"
    assert got[unknown].code == "UNKNOWN_SCHEMA" and got[unknown].stage == "registry"
    by_id = [r for r in registry.requests[before:] if f"/schemas/ids/{sid}" in str(r)]
    assert len(by_id) == 1, registry.requests[before:]
    # cached across calls: no new request for the same schema
    n = len(registry.requests)
    resolve_schema_key(resolver, order)
    assert len(registry.requests) == n


def test_not_protobuf_is_a_record_fault(registry: Any) -> None:
    avro_id = registry.register("fr.avro-value", '{"type": "string"}', schema_type="AVRO")
    resolver = SchemaResolver(open_registry(registry.url))
    r = resolve_schema_key(resolver, SchemaKey(avro_id, None, (0,)))
    assert r.code == "NOT_PROTOBUF" and r.stage == "schema"


def test_registry_outage_raises() -> None:
    from registry_server import start_registry_server

    handle = start_registry_server(port=0)
    url = handle.url
    handle.stop()
    resolver = SchemaResolver(
        open_registry(url, max_retries=1, connect_timeout=0.5, read_timeout=0.5)
    )
    with pytest.raises(RegistryUnavailable):
        resolve_schema_key(resolver, SchemaKey(1, None, (0,)))


# --- framing by heads must agree with codec.parse_frame (frame_columns), record by record ---

_GUID = bytes(range(16))
_frame_heads = st.one_of(
    st.builds(lambda sid: b"\x00" + sid.to_bytes(4, "big"), st.sampled_from([1, 2, 70000])),
    st.just(b"\x01" + _GUID),
    st.binary(max_size=6),  # anything at all: truncated, bad magic, empty
)
_indexes = st.one_of(
    st.just(b"\x00"),
    st.lists(st.integers(0, 3), min_size=1, max_size=3).map(lambda xs: write_message_indexes(xs)),
    st.binary(max_size=3),  # over-long, negative or truncated index lists
)
_framed = st.builds(lambda h, i, p: h + i + p, _frame_heads, _indexes, st.binary(max_size=8))
_header_value = st.one_of(
    st.none(), _framed.map(lambda b: b[:7]), st.builds(lambda h, i: h + i, _frame_heads, _indexes)
)
_headers = st.one_of(
    st.none(),
    st.lists(
        st.tuples(
            st.sampled_from(["__value_schema_id", "__key_schema_id", "trace-id"]), _header_value
        ),
        max_size=3,
    ),
)


def test_frame_batches_match_frame_columns_row_by_row(producer: Any, versions: Any) -> None:
    v1 = versions["v1"]
    values = [
        producer.frame(make_order(v1, 1), "fb.orders"),
        producer.frame(v1.LineItem(sku="x", quantity=1), "fb.items"),
        b"\x07junk",
        None,
        producer.frame(make_order(v1, 2), "fb.orders"),
        b"\x00\x00\x00\x00\x09payload",  # bare payload whose frame is in the header below
    ]
    keys = [
        None,
        b"plain",
        producer.frame(v1.Ping(id="k"), "fb.orders", is_key=True),
        None,
        None,
        None,
    ]
    header_t = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    headers = [
        None,
        [],
        [{"key": "trace", "value": b"1"}],
        None,
        None,
        [{"key": "__value_schema_id", "value": write_frame(3, (0, 1))}],
    ]
    n = len(values)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(["t"] * n),
            pa.array([0] * n, pa.int32()),
            pa.array(range(n), pa.int64()),
            pa.array([None] * n, pa.timestamp("us")),
            pa.array(headers, header_t),
        ],
        names=list(RECORD_COLUMNS),
    )
    (out,) = list(_frame_batches([batch]))
    for i in range(n):
        pairs = None if headers[i] is None else [(h["key"], h["value"]) for h in headers[i]]
        expected = frame_columns(values[i], keys[i], pairs)
        assert _typed(out.to_pylist()[i]) == expected
    assert out.column("_frame_code").to_pylist()[2:4] == ["BAD_MAGIC", "EMPTY_VALUE"]
    assert schema_key_of(out.column("_schema_key")[5].as_py()) == SchemaKey(3, None, (0, 1))


def _typed(row: dict[str, Any]) -> tuple[Any, ...]:
    """A framed row's FRAMED_FIELDS as frame_columns gives them (schema keys typed)."""
    out = []
    for field in FRAMED_FIELDS:
        value = row[field.name]
        if field.name in ("_schema_key", "_key_schema_key"):
            value = schema_key_of(value)
        out.append(value)
    return tuple(out)


_common_heads = st.sampled_from(
    [b"\x00\x00\x00\x00\x01\x00", b"\x00\x00\x00\x00\x01\x02\x02", b"\x00\x00\x01\x11\x70\x00"]
)
# mostly what producers write (few heads, many rows), mixed with anything at all
_batch_rows = st.lists(
    st.one_of(
        st.tuples(
            st.builds(lambda h, p: h + p, _common_heads, st.binary(max_size=4)),
            st.sampled_from([None, b"", b"order-7"]),
            st.sampled_from([None, []]),
        ),
        st.tuples(
            st.one_of(st.none(), _framed),
            st.one_of(st.none(), st.just(b"order-7"), _framed),
            _headers,
        ),
    ),
    max_size=60,
)


@settings(max_examples=6, deadline=None)
@given(_batch_rows)
def test_framing_by_heads_agrees_with_frame_columns(spark: Any, records: list[Any]) -> None:
    """Every drawn record: the framed batch (heads read on the driver, Python for the rest)
    holds what codec.parse_frame gives; the common frames are read from their heads; each
    schema key's decode input is exactly its records, with their payload offsets."""
    drawn = records * 3  # a few hundred rows per example
    rows = [
        (k, v, "t", 0, i, None, None if h is None else [(hk, hv) for hk, hv in h])
        for i, (v, k, h) in enumerate(drawn)
    ]
    schema = (
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, headers array<struct<key: string, value: binary>>"
    )
    bronze = spark.createDataFrame(rows, schema)
    heads = Heads.of_rows(head_counts(bronze))
    jvm = heads.framed(bronze)
    framed = jvm.unionByName(python_framed(bronze, heads)) if heads.python else jvm
    got = {r["offset"]: _typed(r.asDict(recursive=True)) for r in framed.collect()}
    assert len(got) == len(rows)
    for i, (v, k, h) in enumerate(drawn):
        assert got[i] == frame_columns(v, k, h), (v, k, h)
    from_heads = {r["offset"] for r in jvm.select("offset").collect()}
    for i, (v, k, h) in enumerate(drawn):
        common = v is not None and v[:1] == b"\x00" and len(v) >= 6 and not h and not k
        if (
            common
            and v[5] in (0, 2)
            and (v[5] == 0 or len(v) >= 7 and v[6] % 2 == 0 and v[6] < 128)
        ):
            assert i in from_heads, v
    for key in {got[i][5] for i in got} - {None}:
        mine = {i: got[i][4] for i in got if got[i][5] == key}
        decode_input = heads.records_of(bronze, framed, key, with_keys=True).collect()
        assert {r["offset"]: r["_payload_offset"] for r in decode_input} == mine
        for r in decode_input:  # the key frame columns are there when keys are framed
            d = r.asDict(recursive=True)
            key_frame = (schema_key_of(d.get("_key_schema_key")), d.get("_key_payload_offset"))
            assert key_frame == got[d["offset"]][9:]
    keys = sorted({got[i][5] for i in got} - {None}, key=repr)
    if keys:  # every key at once: each record once, with its key's index
        together = heads.records_of_versions(bronze, framed, keys, with_keys=True).collect()
        expected = {i: (keys.index(got[i][5]), got[i][4]) for i in got if got[i][5] in keys}
        assert len(together) == len(expected)
        assert {r["offset"]: (r[VERSION], r["_payload_offset"]) for r in together} == expected


def test_decode_input_by_heads(spark: Any) -> None:
    """Without Python framing: one key written with two heads (``00`` and ``02 00`` both mean
    [0]: two payload offsets), framed and unframed keys, another key; and the batch of one key
    alone (read unfiltered)."""
    records = [
        (write_frame(5, (0,), b"\x08\x01"), write_frame(9, (0,), b"\x08\x07")),
        (b"\x00\x00\x00\x00\x05\x02\x00\x08\x02", b"plain"),
        (write_frame(5, (1,), b"\x08\x03"), None),
        (write_frame(5, (0,), b"\x08\x04"), b""),
    ]
    schema = (
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, headers array<struct<key: string, value: binary>>"
    )
    rows = [(k, v, "t", 0, i, None, []) for i, (v, k) in enumerate(records)]
    bronze = spark.createDataFrame(rows, schema)
    heads = Heads.of_rows(head_counts(bronze))
    assert not heads.python
    first = SchemaKey(5, None, (0,))
    got = heads.records_of(bronze, heads.framed(bronze), first, with_keys=True).collect()
    by_offset = {
        r["offset"]: (
            r["_payload_offset"],
            schema_key_of(r["_key_schema_key"]),
            r["_key_payload_offset"],
        )
        for r in got
    }
    assert by_offset == {
        0: (6, SchemaKey(9, None, (0,)), 6),
        1: (7, None, None),
        3: (6, None, None),
    }
    second = SchemaKey(5, None, (1,))
    framed = heads.framed(bronze)
    of_second = heads.records_of(bronze, framed, second, with_keys=True).collect()
    expected = {o: (0, v[0]) for o, v in by_offset.items()}
    expected |= {r["offset"]: (1, r["_payload_offset"]) for r in of_second}
    assert sorted(expected) == [0, 1, 2, 3]
    both = heads.records_of_versions(bronze, framed, [first, second], with_keys=True).collect()
    assert {r["offset"]: (r[VERSION], r["_payload_offset"]) for r in both} == expected
    alone = bronze.where("offset = 3")
    heads = Heads.of_rows(head_counts(alone))
    decode_input = heads.records_of(alone, heads.framed(alone), first, with_keys=False)
    assert [(r["offset"], r["_payload_offset"]) for r in decode_input.collect()] == [(3, 6)]
    # no head is cut for the decode pass of a batch of one key: no filter, a literal offset
    assert "substring" not in decode_input._jdf.queryExecution().executedPlan().toString()


def test_heads_beyond_the_cap_are_framed_in_python(spark: Any) -> None:
    """Keys that are binary ids starting with a magic byte have a head each: only the most
    frequent ``max_heads`` become literals of the plan, the other records are framed in
    Python, and the batch framed both ways is what codec.parse_frame gives."""
    value = write_frame(5, (0,), b"\x08\x01")
    keys = [b"\x00" + struct.pack(">I", 1000 + n) + b"\x00id" for n in range(12)]
    records = [(value, keys[0])] * 5 + [(value, keys[1])] * 3 + [(value, k) for k in keys[2:]]
    schema = (
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, headers array<struct<key: string, value: binary>>"
    )
    rows = [(k, v, "t", 0, i, None, []) for i, (v, k) in enumerate(records)]
    bronze = spark.createDataFrame(rows, schema)

    heads = Heads.of_rows(head_counts(bronze), max_heads=2)
    assert heads.python
    assert set(heads.keys) == {keys[0][:6], keys[1][:6]}  # the two most frequent heads
    assert sum(heads.counts.values()) == 8  # counted here; the other 10 in Python
    jvm = heads.framed(bronze)
    assert sorted(r["offset"] for r in jvm.select("offset").collect()) == list(range(8))
    framed = jvm.unionByName(python_framed(bronze, heads))
    got = {r["offset"]: _typed(r.asDict(recursive=True)) for r in framed.collect()}
    assert got == {i: frame_columns(v, k, []) for i, (v, k) in enumerate(records)}

    uncapped = Heads.of_rows(head_counts(bronze))
    assert not uncapped.python and len(uncapped.keys) == len(keys)
