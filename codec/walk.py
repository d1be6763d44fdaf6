"""Walks shared by the payload checks: over a message type's graph, and over the
sub-messages of a parsed message."""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message


def fields_of(descriptor: Descriptor) -> list[FieldDescriptor]:
    """The type's declared fields, and the extensions of it registered in its pool."""
    fields = list(descriptor.fields)
    if descriptor.extension_ranges:
        fields += descriptor.file.pool.FindAllExtensions(descriptor)
    return fields


def reachable_types(descriptor: Descriptor) -> list[Descriptor]:
    """The type and every message type its fields (and extensions) lead to, each once."""
    seen: dict[str, Descriptor] = {}
    stack = [descriptor]
    while stack:
        desc = stack.pop()
        if desc.full_name not in seen:
            seen[desc.full_name] = desc
            stack += [f.message_type for f in fields_of(desc) if f.message_type is not None]
    return list(seen.values())


def child_messages(message: Message) -> Iterator[tuple[str, Message | None]]:
    """Each message set directly inside `message`, with its path from there: ``name``,
    ``name[3]``, ``name['key']``, ``(extension.full.name)``. None stands for the values of a
    map whose keys protobuf cannot hand out (a proto2 string key that is not UTF-8)."""
    for field, value in message.ListFields():  # the set fields, extensions included
        if field.message_type is None:
            continue
        name = f"({field.full_name})" if field.is_extension else field.name
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].message_type is None:
                continue
            try:
                entries = list(value.items())
            except UnicodeDecodeError:
                yield name, None
                continue
            for key, item in entries:
                yield f"{name}[{key!r}]", item
        elif field.is_repeated:
            for i, item in enumerate(value):
                yield f"{name}[{i}]", item
        else:
            yield name, value
