"""Column comments come from the .proto comments in a FileDescriptorSet with source info."""

from __future__ import annotations

from pipelines.proto_types import field_comments, message_comment, spark_schema_for


def test_field_comments_are_keyed_by_full_name(protos):
    comments = field_comments(protos.fds)
    assert comments["protolake.test.v3.Scalars.f_int32"] == "A signed 32-bit number."
    # a trailing comment counts when there is no leading one
    assert comments["protolake.test.v3.Scalars.f_string"] == "Trailing comment on a string."
    # nested message types
    assert comments["protolake.test.v3.Point.origin"] == "Where the point came from."
    assert comments["protolake.test.v3.Choice.payload"] == "What the choice carries."
    assert "protolake.test.v3.Scalars.f_int64" not in comments


def test_comments_become_struct_field_metadata_at_every_level(protos):
    descriptor = protos.descriptor("protolake.test.v3.Repeated")
    schema = spark_schema_for(descriptor, file_descriptor_set=protos.fds)
    point = schema["r_msg"].dataType.elementType
    assert point["origin"].metadata == {"comment": "Where the point came from."}
    assert point["x"].metadata == {}


def test_without_source_info_there_are_no_comments(protos):
    descriptor = protos.descriptor("protolake.test.v3.Scalars")
    assert spark_schema_for(descriptor)["f_int32"].metadata == {}
    with_comments = spark_schema_for(descriptor, file_descriptor_set=protos.fds)
    assert with_comments["f_int32"].metadata == {"comment": "A signed 32-bit number."}
    override = spark_schema_for(
        descriptor, comments={"protolake.test.v3.Scalars.f_bool": "Yes or no."}
    )
    assert override["f_bool"].metadata == {"comment": "Yes or no."}


def test_message_comments_by_full_name(protos):
    assert (
        message_comment(protos.fds, "protolake.test.v3.Scalars")
        == "Every scalar type, implicit presence."
    )
    assert message_comment(protos.fds, "protolake.test.v3.Point") == ""  # none in the .proto
    assert message_comment(protos.fds, "protolake.test.v3.NoSuchMessage") == ""
    assert message_comment(protos.fds, "other.Scalars") == ""
