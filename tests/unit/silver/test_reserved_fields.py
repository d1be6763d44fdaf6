"""A message field named like a column silver adds is a schema conflict, not a failing batch:
its records go to quarantine (``SCHEMA_CONFLICT``, the fields named), the table is left alone."""

from __future__ import annotations

from codec import SchemaKey
from codec.protoc import run_protoc
from pipelines.silver.plan import RESERVED_PREFIX, plan_table, table_schema
from pipelines.silver.resolution import Resolution


def _resolution(schema_id: int, body: str) -> Resolution:
    proto = f'syntax = "proto3";\npackage t.v1;\nmessage M {{ {body} }}\n'
    fds = run_protoc({"t/m.proto": proto}, ["t/m.proto"], source_info=False)
    return Resolution(SchemaKey(schema_id, None, (0,)), "t.v1.M", fds)


def test_fields_named_as_silvers_columns_are_a_conflict_naming_them() -> None:
    clean = _resolution(1, "string id = 1;")
    clashing = _resolution(2, "string id = 1; bytes _key = 2; string _Value = 3; int64 x = 4;")
    plan = plan_table("t.v1.M", "t_v1_m", "/lake/silver/t_v1_m", None, [clashing, clean], 8)
    assert [r.schema_id for r in plan.versions] == [1]
    assert [(r.schema_id, reason) for r, reason in plan.conflicts] == [
        (
            2,
            "schema id:2 of t.v1.M has fields named as silver's own columns (_key, _Value): "
            "rename them",
        )
    ]
    assert plan.merged is not None and plan.merged.names == ["id"]
    names = [n.lower() for n in table_schema(plan.merged).names]
    assert len(names) == len(set(names))


def test_a_first_version_that_clashes_leaves_no_table_to_write() -> None:
    plan = plan_table("t.v1.M", "t", "/p", None, [_resolution(3, "int64 _kafka_offset = 1;")], 8)
    assert plan.merged is None and plan.versions == [] and len(plan.conflicts) == 1


def test_nested_fields_may_use_any_name() -> None:
    res = _resolution(4, "message In { bytes _key = 1; } In inner = 1;")
    plan = plan_table("t.v1.M", "t", "/p", None, [res], 8)
    assert plan.conflicts == [] and plan.merged is not None


def test_quality_flag_columns_carry_the_reserved_prefix() -> None:
    from quality.compiled import FLAG
    from quality.split import _FLAG

    assert FLAG.format(0).startswith(RESERVED_PREFIX)
    assert _FLAG.format(0).startswith(RESERVED_PREFIX)
