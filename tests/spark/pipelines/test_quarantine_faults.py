"""``silver.rejects.quarantine_faults``: the records of every unresolved schema key, matched by
the whole key (id or GUID, and message indexes), by literals of the plan or through a broadcast
join, and nothing else."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql import types as T  # noqa: N812

from codec import SchemaKey
from lakehouse.bronze_columns import RECORD_COLUMNS
from pipelines.silver.framing import FRAMED_FIELDS, SCHEMA_KEY_TYPE
from pipelines.silver.rejects import quarantine_faults
from pipelines.silver.resolution import Resolution
from tests.support.silver_testkit import BRONZE_DDL, bronze_row

GUID = "0b0f4a4e-6c1e-4bb1-9a3b-5a1d9a0c2f11"


def framed_rows(spark: Any, keys: list[SchemaKey | None]) -> Any:
    """One framed record per key (offset = position; None: a bad frame): bronze rows of the
    test kit with the framing columns, null but for ``_schema_key``."""
    bronze = spark.createDataFrame(
        [bronze_row(b"v", "t", offset, key=b"k") for offset in range(len(keys))], BRONZE_DDL
    )
    schema_keys = spark.createDataFrame(
        [
            (offset, None if k is None else (k.schema_id, k.schema_guid, list(k.message_indexes)))
            for offset, k in enumerate(keys)
        ],
        T.StructType(
            [T.StructField("offset", T.LongType()), T.StructField("_schema_key", SCHEMA_KEY_TYPE)]
        ),
    )
    framing = [
        F.col(f.name) if f.name == "_schema_key" else F.lit(None).cast(f.dataType).alias(f.name)
        for f in FRAMED_FIELDS
    ]
    return bronze.join(schema_keys, "offset").select(*RECORD_COLUMNS, *framing)


@pytest.mark.parametrize("as_literals", [16, 0], ids=["literals", "broadcast-join"])
def test_each_fault_takes_exactly_its_records(spark: Any, as_literals: int) -> None:
    by_id = SchemaKey(7, None, (0,))
    by_id_other_message = SchemaKey(7, None, (1, 0))
    by_guid = SchemaKey(None, GUID, (0,))
    resolved = SchemaKey(8, None, (0,))
    keys = [by_id, by_id_other_message, by_guid, resolved, None, by_id, SchemaKey(9, None, (0,))]
    faults = [
        Resolution(by_id, code="UNKNOWN_SCHEMA", stage="registry", reason="no id 7"),
        Resolution(by_id_other_message, code="UNKNOWN_MESSAGE", stage="schema", reason="[1, 0]"),
        Resolution(by_guid, code="UNKNOWN_SCHEMA", stage="registry", reason="no guid"),
        Resolution(SchemaKey(9, None, (0,)), code="NOT_PROTOBUF", stage="schema", reason="avro"),
    ]
    q_time = F.lit(datetime(2026, 1, 2, tzinfo=UTC)).cast("timestamp")
    out = quarantine_faults(framed_rows(spark, keys), faults, q_time, as_literals)
    got = {r["_kafka_offset"]: (r["reason_code"], r["stage"], r["reason"]) for r in out.collect()}
    assert got == {
        0: ("UNKNOWN_SCHEMA", "registry", "no id 7"),
        1: ("UNKNOWN_MESSAGE", "schema", "[1, 0]"),
        2: ("UNKNOWN_SCHEMA", "registry", "no guid"),
        5: ("UNKNOWN_SCHEMA", "registry", "no id 7"),
        6: ("NOT_PROTOBUF", "schema", "avro"),
    }
