"""schemas_compatible: new schema versions may add fields anywhere, and change nothing else."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pipelines.proto_types import schemas_compatible, spark_schema_for
from tests.support.proto_types_testkit import Protos, compile_protos

ORDER = "protolake.test.evolve.Order"


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    out = {}
    for version in ("v1", "v2", "v3"):
        fds = compile_protos(tmp_path_factory.mktemp(version), f"evolution/{version}/order.proto")
        protos = Protos(fds)
        out[version] = spark_schema_for(protos.descriptor(ORDER), file_descriptor_set=fds)
    return out


def test_same_schema_is_compatible_and_unchanged(versions):
    merged, reason = schemas_compatible(versions["v1"], versions["v1"])
    assert reason is None
    assert merged == versions["v1"]


def test_added_fields_at_every_depth_are_merged(versions):
    merged, reason = schemas_compatible(versions["v1"], versions["v2"])
    assert reason is None
    item = StructType(
        [
            StructField("sku", StringType()),
            StructField("qty", IntegerType()),
            StructField("price", DoubleType()),
        ]
    )
    assert merged == StructType(
        [
            StructField("id", StringType()),
            StructField("items", ArrayType(item)),
            StructField("by_sku", MapType(StringType(), item)),
            StructField(
                "placed_at", TimestampType(), metadata={"comment": "When the order was placed."}
            ),
        ]
    )
    assert merged["placed_at"].metadata == {"comment": "When the order was placed."}


def test_older_schema_after_newer_keeps_the_newer_columns(versions):
    merged, reason = schemas_compatible(versions["v2"], versions["v1"])
    assert reason is None
    assert merged == versions["v2"]


def test_type_change_names_the_first_conflicting_path(versions):
    merged, reason = schemas_compatible(versions["v1"], versions["v3"])
    assert merged is None
    assert reason == "column `items.element.qty`: existing int, new bigint"


def test_map_key_and_struct_shape_conflicts():
    old = StructType([StructField("m", MapType(StringType(), LongType()))])
    new = StructType([StructField("m", MapType(IntegerType(), LongType()))])
    assert schemas_compatible(old, new) == (None, "column `m.key`: existing string, new int")
    value = StructType([StructField("m", MapType(StringType(), StringType()))])
    assert schemas_compatible(old, value) == (
        None,
        "column `m.value`: existing bigint, new string",
    )
    nested_old = StructType([StructField("s", StructType([StructField("a", LongType())]))])
    nested_new = StructType([StructField("s", StringType())])
    assert schemas_compatible(nested_old, nested_new) == (
        None,
        "column `s`: existing struct<a:bigint>, new string",
    )


def test_case_only_rename_is_a_conflict():
    old = StructType([StructField("Name", StringType())])
    new = StructType([StructField("name", StringType())])
    merged, reason = schemas_compatible(old, new)
    assert merged is None
    assert reason == "column `Name`: renamed to `name` (only the case differs)"


def test_nullability_widens_and_old_comments_stay():
    old = StructType([StructField("a", LongType(), False, metadata={"comment": "old"})])
    new = StructType([StructField("a", LongType(), True, metadata={"comment": "new"})])
    merged, reason = schemas_compatible(old, new)
    assert reason is None
    assert merged == StructType([StructField("a", LongType(), True, metadata={"comment": "old"})])
