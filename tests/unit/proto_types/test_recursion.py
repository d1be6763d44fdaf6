"""Recursive messages expand to max_depth levels; the next level is JSON text."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.types import ArrayType, LongType, MapType, StringType, StructField, StructType

from pipelines.proto_types import RowConverter, spark_schema_for


def _leaf_tree() -> StructType:
    # TreeNode at the last expanded level: its TreeNode fields are JSON text
    return StructType(
        [
            StructField("name", StringType()),
            StructField("children", ArrayType(StringType())),
            StructField("parent", StringType()),
            StructField("named", MapType(StringType(), StringType())),
        ]
    )


def test_tree_schema_at_depth_two(protos):
    schema = spark_schema_for(protos.descriptor("protolake.test.v3.TreeNode"), max_depth=2)
    leaf = _leaf_tree()
    assert schema == StructType(
        [
            StructField("name", StringType()),
            StructField("children", ArrayType(leaf)),
            StructField("parent", leaf),
            StructField("named", MapType(StringType(), leaf)),
        ]
    )


def test_depth_one_keeps_only_the_root_as_columns(protos):
    schema = spark_schema_for(protos.descriptor("protolake.test.v3.TreeNode"), max_depth=1)
    assert schema == _leaf_tree()


def test_default_depth_is_three_levels(protos):
    schema = spark_schema_for(protos.descriptor("protolake.test.v3.TreeNode"))
    level2 = schema["parent"].dataType
    level3 = level2["parent"].dataType
    assert isinstance(level3, StructType)
    assert level3["parent"].dataType == StringType()


def test_max_depth_below_one_is_refused(protos):
    with pytest.raises(ValueError, match="max_depth"):
        RowConverter(protos.descriptor("protolake.test.v3.TreeNode"), max_depth=0)


def test_levels_beyond_the_depth_hold_the_submessage_as_json(protos):
    cls = protos.v3("TreeNode")
    root = cls(name="root")
    child = root.children.add(name="child")
    grandchild = child.children.add(name="grandchild")
    grandchild.children.add(name="great")
    grandchild.named["k"].name = "named-deep"
    root.parent.name = "up"
    conv = RowConverter(cls.DESCRIPTOR, max_depth=2)
    row = conv.to_dict(cls.FromString(root.SerializeToString()))
    assert row["name"] == "root"
    assert row["parent"] == {"name": "up", "children": [], "parent": None, "named": []}
    (child_row,) = row["children"]
    assert child_row["name"] == "child"
    assert child_row["parent"] is None
    (text,) = child_row["children"]
    assert json.loads(text) == {
        "name": "grandchild",
        "children": [{"name": "great"}],
        "named": {"k": {"name": "named-deep"}},
    }


def test_mutual_recursion_counts_each_type(protos):
    descriptor = protos.descriptor("protolake.test.v3.Expr")
    schema = spark_schema_for(descriptor, max_depth=2)
    op = schema["op"].dataType
    inner_expr = op["left"].dataType
    assert inner_expr.fieldNames() == ["literal", "op", "node_case"]
    assert inner_expr["literal"].dataType == LongType()
    assert inner_expr["op"].dataType["left"].dataType == StringType()
    cls = protos.v3("Expr")
    expr = cls()
    expr.op.operator = "+"
    expr.op.left.literal = 1
    expr.op.right.op.operator = "*"
    expr.op.right.op.left.literal = 2
    expr.op.right.op.right.op.operator = "-"
    row = RowConverter(descriptor, max_depth=2).to_dict(expr)
    assert row["node_case"] == "op"
    assert row["literal"] is None
    assert row["op"]["left"] == {"literal": 1, "op": None, "node_case": "literal"}
    deep = row["op"]["right"]["op"]
    assert deep["operator"] == "*"
    assert json.loads(deep["left"]) == {"literal": "2"}  # int64 is a string in proto JSON
    assert json.loads(deep["right"]) == {"op": {"operator": "-"}}
