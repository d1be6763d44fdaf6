"""oneof: members are null unless set, plus a `<oneof>_case` column; proto3 `optional` gets none."""

from __future__ import annotations

from pyspark.sql.types import StringType

from pipelines.proto_types import RowConverter, column_names, spark_schema_for


def test_case_columns_follow_their_oneof_and_avoid_field_names(protos):
    descriptor = protos.descriptor("protolake.test.v3.Choice")
    schema = spark_schema_for(descriptor)
    # `kind_case` is a real field, so the case column of oneof `kind` becomes `kind_case_`;
    # `note` is proto3 optional: its synthetic oneof `_note` gets no case column.
    assert schema.fieldNames() == [
        "id",
        "number",
        "text",
        "point",
        "payload_case",
        "kind_case",
        "flag",
        "color",
        "kind_case_",
        "note",
    ]
    assert schema["payload_case"].dataType == StringType()
    assert schema["kind_case_"].dataType == StringType()
    assert column_names(descriptor)[1] == {"payload": "payload_case", "kind": "kind_case_"}


def test_oneof_values_and_case(protos):
    cls = protos.v3("Choice")
    conv = RowConverter(cls.DESCRIPTOR)
    msgs = [
        cls(id="a", number=0, kind_case="literal", color=0),
        cls(id="b", text="hello", flag=False),
        cls(id="c", point={"x": 1}, note=""),
        cls(id="d"),
    ]
    rows = conv.to_record_batch([cls.FromString(m.SerializeToString()) for m in msgs]).to_pylist()
    assert rows == [
        {
            "id": "a",
            "number": 0,
            "text": None,
            "point": None,
            "payload_case": "number",
            "kind_case": "literal",
            "flag": None,
            "color": "COLOR_UNSPECIFIED",
            "kind_case_": "color",
            "note": None,
        },
        {
            "id": "b",
            "number": None,
            "text": "hello",
            "point": None,
            "payload_case": "text",
            "kind_case": "",
            "flag": False,
            "color": None,
            "kind_case_": "flag",
            "note": None,
        },
        {
            "id": "c",
            "number": None,
            "text": None,
            "point": {"x": 1, "y": 0, "origin": None},
            "payload_case": "point",
            "kind_case": "",
            "flag": None,
            "color": None,
            "kind_case_": None,
            "note": "",
        },
        {
            "id": "d",
            "number": None,
            "text": None,
            "point": None,
            "payload_case": None,
            "kind_case": "",
            "flag": None,
            "color": None,
            "kind_case_": None,
            "note": None,
        },
    ]


def test_oneof_comment_becomes_the_case_column_comment(protos):
    descriptor = protos.descriptor("protolake.test.v3.Choice")
    schema = spark_schema_for(descriptor, file_descriptor_set=protos.fds)
    assert schema["payload_case"].metadata == {"comment": "What the choice carries."}
    assert schema["kind_case"].metadata == {
        "comment": "Collides with the case column of oneof `kind`."
    }
