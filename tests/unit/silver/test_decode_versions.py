"""One pass over several schema versions (``decode_pass.decode_version_batches``) gives each
version's rows exactly as decoding that version alone (``decode.decode_batches``) does: the
message in the version's struct column, the other versions' columns null, the same lineage and
errors. Pure Python and Arrow: what the Python workers run."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import types as T  # noqa: N812
from pyspark.sql.pandas.types import to_arrow_schema

from lakehouse.bronze_columns import RECORD_COLUMNS
from pipelines.silver.decode import (
    LINEAGE_DECODE_FIELDS,
    DecodeSpec,
    decode_batches,
    message_spark_schema,
)
from pipelines.silver.decode_pass import decode_all, decode_version_batches, version_column
from pipelines.silver.framing import VERSION
from tests.support.proto_types_testkit import Protos, compile_protos

TYPES = ("protolake.test.v3.Scalars", "protolake.test.v3.Point", "protolake.test.v3.Repeated")
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
FRAME = b"\x00\x00\x00\x00\x07\x00"  # magic, schema id 7, message index 0: payload at 6


@pytest.fixture(scope="module")
def protos(tmp_path_factory: pytest.TempPathFactory) -> Protos:
    return Protos(compile_protos(Path(tmp_path_factory.mktemp("versions")), "types3.proto"))


def _specs(protos: Protos, native: bool) -> list[DecodeSpec]:
    return [DecodeSpec(protos.fds, t, 3, False, {}, native) for t in TYPES]


def _payloads(protos: Protos) -> list[tuple[int, bytes]]:
    """(version, value) of rows of the three types, interleaved, with undecodable ones."""
    scalars = protos.v3("Scalars")(f_int32=-5, f_string="héllo", f_bytes=b"\x00\xff")
    point = protos.v3("Point")(x=3, y=-4, origin={"source": "gps"})
    repeated = protos.v3("Repeated")(r_int32=[1, -2, 3], r_int64=[2**40])
    rows = []
    for i in range(12):
        message = (scalars, point, repeated)[i % 3]
        rows.append((i % 3, FRAME + message.SerializeToString()))
    rows.append((1, FRAME + b"\xff\xff\xff"))  # not a message: BAD_PAYLOAD in version 1
    rows.append((0, FRAME + b"\x0a"))  # a truncated field
    return rows


def _batch(rows: list[tuple[int, bytes]]) -> pa.RecordBatch:
    n = len(rows)
    columns = {
        "key": pa.array([b"k%d" % i for i in range(n)], pa.binary()),
        "value": pa.array([v for _, v in rows], pa.binary()),
        "topic": pa.array(["t"] * n, pa.string()),
        "partition": pa.array([0] * n, pa.int32()),
        "offset": pa.array(range(n), pa.int64()),
        "timestamp": pa.array([datetime(2026, 1, 1, tzinfo=UTC)] * n, pa.timestamp("us", "UTC")),
        "headers": pa.array([[("h", b"v")]] * n, HEADERS),
        "_payload_offset": pa.array([len(FRAME)] * n, pa.int32()),
        VERSION: pa.array([version for version, _ in rows], pa.int32()),
    }
    assert list(columns)[: len(RECORD_COLUMNS)] == list(RECORD_COLUMNS)
    return pa.RecordBatch.from_pydict(columns)


def _by_offset(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {row["_kafka_offset"]: row for row in rows}


@pytest.mark.parametrize("native", [True, False], ids=["compiled decoder", "upb"])
def test_one_pass_gives_each_version_the_rows_of_its_own_pass(protos: Protos, native: bool) -> None:
    rows = _payloads(protos)
    batch = _batch(rows)
    specs = _specs(protos, native)
    out = list(decode_version_batches(specs, [batch]))

    # the schema mapInArrow is given (decode_pass.decode_versions): what Spark reads the batches as
    messages = [message_spark_schema(s.file_descriptor_set, s.message_type, 3) for s in specs]
    spark_schema = T.StructType(
        [
            T.StructField(VERSION, T.IntegerType()),
            *[T.StructField(version_column(i), m) for i, m in enumerate(messages)],
            *LINEAGE_DECODE_FIELDS,
        ]
    )
    expected_types = [f.type for f in to_arrow_schema(spark_schema, timezone="UTC")]
    assert sum(b.num_rows for b in out) == len(rows), "every record once"
    seen: dict[int, dict[str, Any]] = {}
    for b in out:
        assert b.schema.names == spark_schema.names
        assert [f.type for f in b.schema] == expected_types
        for row in b.to_pylist():
            version = row[VERSION]
            others = [row[version_column(i)] for i in range(3) if i != version]
            assert others == [None, None], "another version's column holds a value"
            seen[row["_kafka_offset"]] = row
    assert sorted(seen) == list(range(len(rows)))

    for version, spec in enumerate(specs):
        mine = batch.filter(pc.equal(batch.column(VERSION), version))
        alone = _by_offset([r for b in decode_batches(spec, [mine]) for r in b.to_pylist()])
        assert alone, f"version {version} has rows"
        for offset, expected in alone.items():
            got = seen[offset]
            assert got[VERSION] == version
            message = got[version_column(version)] or {}
            names = [n for n in expected if n not in {f.name for f in LINEAGE_DECODE_FIELDS}]
            assert {n: message.get(n) for n in names} == {n: expected[n] for n in names}
            for field in LINEAGE_DECODE_FIELDS:
                assert got[field.name] == expected[field.name], field.name
    codes = {offset: row["_decode_code"] for offset, row in seen.items()}
    assert codes[len(rows) - 2] is not None and codes[len(rows) - 1] is not None
    assert [c for o, c in codes.items() if o < len(rows) - 2] == [None] * (len(rows) - 2)


def test_counting_failures_needs_a_keep_that_computes_the_pass() -> None:
    """The failures are read once the pass ran: without a ``keep`` that runs it, reading them
    would wait for ever, so ``decode_all`` refuses at once."""
    with pytest.raises(ValueError, match="count_failures"):
        decode_all(None, {}, count_failures=True)  # type: ignore[arg-type]
