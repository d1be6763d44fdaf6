"""Column comments from the comments of a .proto file.

The upb runtime drops ``source_code_info`` when a file enters a descriptor pool, so the
comments cannot be read from a ``Descriptor``; they are read here from the serialized
``FileDescriptorSet`` (compiled with ``protoc --include_source_info``), once per schema.

Paths follow descriptor.proto's ``SourceCodeInfo.Location.path``: in a ``FileDescriptorProto``
``message_type`` is field 4; in a ``DescriptorProto`` ``field`` is 2, ``nested_type`` 3 and
``oneof_decl`` 8 (https://protobuf.dev/reference/protobuf/google.protobuf/#source-code-info).
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2

_FILE_MESSAGE_TYPE = 4
_MESSAGE_FIELD = 2
_MESSAGE_NESTED_TYPE = 3
_MESSAGE_ONEOF = 8


def field_comments(
    file_descriptor_set: bytes | descriptor_pb2.FileDescriptorSet,
) -> dict[str, str]:
    """Return the comment of every commented field and oneof, keyed by its full name.

    Keys are full names as protobuf spells them (``pkg.Message.field``,
    ``pkg.Message.Nested.oneof_name``). The leading comment wins; a field without one takes
    its trailing comment. Text is stripped of surrounding whitespace; blank comments are left
    out. A set compiled without source info yields an empty mapping.
    """
    fds = file_descriptor_set
    if isinstance(fds, bytes | bytearray | memoryview):
        fds = descriptor_pb2.FileDescriptorSet.FromString(bytes(fds))
    comments: dict[str, str] = {}
    for file in fds.file:
        texts: dict[tuple[int, ...], str] = {}
        for loc in file.source_code_info.location:
            text = (loc.leading_comments or loc.trailing_comments).strip()
            if text:
                texts[tuple(loc.path)] = text
        if not texts:
            continue
        prefix = f"{file.package}." if file.package else ""
        for index, message in enumerate(file.message_type):
            _collect(message, prefix, (_FILE_MESSAGE_TYPE, index), texts, comments)
    return comments


def _collect(
    message: descriptor_pb2.DescriptorProto,
    prefix: str,
    path: tuple[int, ...],
    texts: dict[tuple[int, ...], str],
    out: dict[str, str],
) -> None:
    full_name = prefix + message.name
    for index, field in enumerate(message.field):
        text = texts.get((*path, _MESSAGE_FIELD, index))
        if text:
            out[f"{full_name}.{field.name}"] = text
    for index, oneof in enumerate(message.oneof_decl):
        text = texts.get((*path, _MESSAGE_ONEOF, index))
        if text:
            out[f"{full_name}.{oneof.name}"] = text
    for index, nested in enumerate(message.nested_type):
        _collect(nested, full_name + ".", (*path, _MESSAGE_NESTED_TYPE, index), texts, out)


def message_comment(
    file_descriptor_set: bytes | descriptor_pb2.FileDescriptorSet, full_name: str
) -> str:
    """The comment of the message ``full_name`` (leading, else trailing), or ``""``."""
    fds = file_descriptor_set
    if isinstance(fds, bytes | bytearray | memoryview):
        fds = descriptor_pb2.FileDescriptorSet.FromString(bytes(fds))
    for file in fds.file:
        prefix = f"{file.package}." if file.package else ""
        if not full_name.startswith(prefix):
            continue
        path: tuple[int, ...] = ()
        messages = file.message_type
        step = _FILE_MESSAGE_TYPE
        parts = full_name[len(prefix) :].split(".")
        for part in parts:
            index = next((i for i, m in enumerate(messages) if m.name == part), None)
            if index is None:
                break
            path = (*path, step, index)
            messages, step = messages[index].nested_type, _MESSAGE_NESTED_TYPE
        else:
            for loc in file.source_code_info.location:
                if tuple(loc.path) == path:
                    return (loc.leading_comments or loc.trailing_comments).strip()
            return ""
    return ""
