"""Framing columns and driver-side resolution, on frames from confluent-kafka's serializer."""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codec import RegistryUnavailable, SchemaResolver, open_registry, write_frame
from codec.framing import write_message_indexes
from pipelines.silver.framing import (
    BRONZE_COLUMNS,
    FRAMED_FIELDS,
    Framer,
    _frame_batches,
    frame_columns,
    parse_schema_key,
    schema_key,
)
from pipelines.silver.resolution import resolve_schema_key, resolve_schema_keys
from tests.support.silver_testkit import make_order


def test_schema_key_round_trip() -> None:
    assert schema_key(42, None, (0, 1)) == "id:42|0.1"
    assert parse_schema_key("id:42|0.1") == (42, None, (0, 1))
    guid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert parse_schema_key(schema_key(None, guid, (2,))) == (None, guid, (2,))


def test_frame_columns_of_real_frames(producer: Any, versions: Any) -> None:
    v1 = versions["v1"]
    value = producer.frame(make_order(v1, 1), "fr.orders")
    item = producer.frame(v1.LineItem(sku="x", quantity=1), "fr.items")
    magic, sid, guid, idx, off, key, code, stage, reason, kkey, koff = frame_columns(
        value, None, None
    )
    assert (magic, guid, idx, code, kkey, koff) == (0, None, [0], None, None, None)
    assert key == f"id:{sid}|0" and off == 6
    cols = frame_columns(item, None, None)
    # LineItem comes after the map's synthetic entry: nested message 1 of Order.
    assert cols[3] == [0, 1] and cols[5].endswith("|0.1")


def test_framed_key_is_recognised_and_plain_key_is_not(producer: Any, versions: Any) -> None:
    v1 = versions["v1"]
    value = producer.frame(make_order(v1, 2), "fr.keyed")
    key = producer.frame(v1.Ping(id="k-2"), "fr.keyed", is_key=True)
    cols = frame_columns(value, key, None)
    assert cols[9] is not None and cols[9].endswith("|1") and cols[10] == 7  # [1] is 02 02
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
    assert (
        cols[6] is None and cols[4] == 0 and cols[5] == f"id:{struct.unpack('>I', value[1:5])[0]}|0"
    )


def test_resolution_once_per_schema_and_faults(registry: Any, producer: Any, versions: Any) -> None:
    v1 = versions["v1"]
    value = producer.frame(make_order(v1, 4), "fr.res")
    sid = struct.unpack(">I", value[1:5])[0]
    resolver = SchemaResolver(open_registry(registry.url))
    before = len(registry.requests)
    got = resolve_schema_keys(
        resolver, [f"id:{sid}|0", f"id:{sid}|0.1", f"id:{sid}|1", f"id:{sid}|9", "id:999999|0"]
    )
    assert got[f"id:{sid}|0"].message_type == "silvertest.v1.Order"
    assert got[f"id:{sid}|0.1"].message_type == "silvertest.v1.Order.LineItem"
    assert got[f"id:{sid}|1"].message_type == "silvertest.v1.Ping"
    assert got[f"id:{sid}|9"].code == "UNKNOWN_MESSAGE"
    assert got["id:999999|0"].code == "UNKNOWN_SCHEMA" and got["id:999999|0"].stage == "registry"
    by_id = [r for r in registry.requests[before:] if f"/schemas/ids/{sid}" in str(r)]
    assert len(by_id) == 1, registry.requests[before:]
    # cached across calls: no new request for the same schema
    n = len(registry.requests)
    resolve_schema_key(resolver, f"id:{sid}|0")
    assert len(registry.requests) == n


def test_not_protobuf_is_a_record_fault(registry: Any) -> None:
    avro_id = registry.register("fr.avro-value", '{"type": "string"}', schema_type="AVRO")
    resolver = SchemaResolver(open_registry(registry.url))
    r = resolve_schema_key(resolver, f"id:{avro_id}|0")
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
        resolve_schema_key(resolver, "id:1|0")


# --- the memoised Framer the executors use must agree with frame_columns, record by record ---

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
_records = st.lists(
    st.tuples(
        st.one_of(st.none(), _framed),
        st.one_of(st.none(), st.just(b"order-7"), _framed),
        _headers,
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_records)
def test_framer_agrees_with_frame_columns(records: list[Any]) -> None:
    framer = Framer()  # one framer for the whole stream, as an executor keeps it
    for value, key, headers in records + records:  # the second pass reads the memo
        assert framer.columns(value, key, headers) == frame_columns(value, key, headers)


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
        names=list(BRONZE_COLUMNS),
    )
    (out,) = list(_frame_batches([batch]))
    names = [f.name for f in FRAMED_FIELDS]
    for i in range(n):
        pairs = None if headers[i] is None else [(h["key"], h["value"]) for h in headers[i]]
        expected = frame_columns(values[i], keys[i], pairs)
        assert tuple(out.column(name)[i].as_py() for name in names) == expected
    assert out.column("_frame_code").to_pylist()[2:4] == ["BAD_MAGIC", "EMPTY_VALUE"]
    assert out.column("_schema_key")[5].as_py() == "id:3|0.1"


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


@settings(max_examples=300, deadline=None)
@given(_batch_rows)
def test_column_wise_framing_agrees_with_frame_columns(records: list[Any]) -> None:
    header_t = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    n = len(records)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([r[1] for r in records], pa.binary()),
            pa.array([r[0] for r in records], pa.binary()),
            pa.array(["t"] * n),
            pa.array([0] * n, pa.int32()),
            pa.array(range(n), pa.int64()),
            pa.array([None] * n, pa.timestamp("us")),
            pa.array(
                [
                    None if h is None else [{"key": k, "value": v} for k, v in h]
                    for _, _, h in records
                ],
                header_t,
            ),
        ],
        names=list(BRONZE_COLUMNS),
    )
    outs = list(_frame_batches([batch, batch]))  # the second batch meets a warm memo
    names = [f.name for f in FRAMED_FIELDS]
    for out in outs:
        got = list(zip(*(out.column(name).to_pylist() for name in names), strict=True))
        assert got == [frame_columns(v, k, h) for v, k, h in records]
