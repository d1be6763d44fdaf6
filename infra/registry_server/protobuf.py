"""Protobuf schemas: tell base64 descriptors from text, compile text, check descriptors link.

A Protobuf schema arrives as ``.proto`` text or as base64 of a ``FileDescriptorProto`` (what
confluent-kafka's Python serializer sends). `prepare_protobuf` turns either into the two
forms the registry answers: ``.proto`` text (the default format; a descriptor is rendered by
`proto_text.render_proto`) and base64 of a ``FileDescriptorProto`` (``?format=serialized``;
text is compiled by protoc through `codec.protoc` against its references).

Raises `RegistryError` 42201 (`invalid_schema`) when a schema does not compile or link.
Without protoc (grpcio-tools not installed), text is accepted unchecked and has no
serialized form.
"""

from __future__ import annotations

import base64
import binascii
import importlib
from collections.abc import Sequence
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool

from codec.errors import SchemaInvalid
from codec.protoc import protoc_available, run_protoc

from .errors import invalid_schema
from .proto_text import render_proto

# Imports every Protobuf client resolves itself; never registered as references.
BUILTIN_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")

# Where the generated module of a well-known import lives, by the import's folder.
_BUILTIN_MODULES = {
    "google/protobuf/": "google.protobuf.{}_pb2",
    "confluent/type/": "confluent_kafka.schema_registry.confluent.type.{}_pb2",
    "confluent/": "confluent_kafka.schema_registry.confluent.{}_pb2",
}


def parse_serialized(schema: str) -> Any | None:
    """Return the FileDescriptorProto when ``schema`` is base64 of one, else None (text)."""
    if not schema or any(c.isspace() for c in schema.strip()):
        return None
    try:
        raw = base64.b64decode(schema.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    fdp = descriptor_pb2.FileDescriptorProto()
    try:
        fdp.ParseFromString(raw)
    except Exception:  # DecodeError: base64 of something else
        return None
    if not (fdp.name or fdp.package or fdp.message_type or fdp.enum_type or fdp.syntax):
        return None
    return fdp


def descriptor_of(serialized: str, name: str) -> Any:
    """The FileDescriptorProto of a stored serialized form, renamed to the import `name`."""
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    fdp.name = name
    return fdp


def prepare_protobuf(schema: str, dependencies: Sequence[Any]) -> tuple[str, str | None]:
    """Validate a Protobuf schema against its references; return (text, serialized).

    Args:
        schema: ``.proto`` text or base64 of a FileDescriptorProto.
        dependencies: FileDescriptorProtos of the references, each named by its import.
    """
    fdp = parse_serialized(schema)
    if fdp is not None:
        validate_descriptor(fdp, dependencies)
        return render_proto(fdp), _encode(fdp)
    if not protoc_available():  # pragma: no cover - no protoc: accept text unchecked
        return schema, None
    return schema, _encode(compile_proto_text(schema, "default.proto", dependencies))


def _encode(fdp: Any) -> str:
    return base64.b64encode(fdp.SerializeToString()).decode("ascii")


def compile_proto_text(text: str, name: str, dependencies: Sequence[Any]) -> Any:
    """Compile ``.proto`` text with protoc; ``dependencies`` are FileDescriptorProtos by name.

    Returns the FileDescriptorProto of ``name`` (no source info: what a client sends);
    raises RegistryError 42201 with protoc's message when the text does not compile.
    """
    deps = None
    if dependencies:
        deps = descriptor_pb2.FileDescriptorSet(file=list(dependencies)).SerializeToString()
    try:
        raw = run_protoc({name: text}, [name], descriptor_set_in=deps, source_info=False)
    except SchemaInvalid as exc:
        raise invalid_schema(str(exc)) from None
    for fdp in descriptor_pb2.FileDescriptorSet.FromString(raw).file:
        if fdp.name == name:
            return fdp
    raise invalid_schema(f"protoc produced no descriptor for {name}")


def validate_descriptor(fdp: Any, dependencies: Sequence[Any]) -> None:
    """Check that a FileDescriptorProto links against its dependencies (42201 otherwise)."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    try:
        for item in [*dependencies, fdp]:
            for name in item.dependency:
                if name not in added and name.startswith(BUILTIN_PREFIXES):
                    builtin = builtin_file(name)
                    if builtin is None:
                        return  # an import we cannot load here: accept as given
                    _add_with_deps(pool, builtin, added)
            if item.name not in added:
                pool.Add(item)
                added.add(item.name)
        pool.FindFileByName(fdp.name)
    except Exception as exc:  # TypeError/KeyError from the pool: unresolved or invalid
        raise invalid_schema(str(exc)) from None


def builtin_file(name: str) -> Any | None:
    """The FileDescriptorProto of a well-known import (google/protobuf/*, confluent/*)."""
    for prefix, pattern in _BUILTIN_MODULES.items():
        if name.startswith(prefix) and name.endswith(".proto"):
            stem = name[len(prefix) : -len(".proto")]
            if "/" in stem:
                continue
            try:
                importlib.import_module(pattern.format(stem))
            except ImportError:
                continue
            break
    try:
        fd = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        return None
    fdp = descriptor_pb2.FileDescriptorProto()
    fd.CopyToProto(fdp)
    return fdp


def _add_with_deps(pool: Any, fdp: Any, added: set[str]) -> None:
    for name in fdp.dependency:
        if name not in added:
            dep = builtin_file(name)
            if dep is not None:
                _add_with_deps(pool, dep, added)
    if fdp.name not in added:
        pool.Add(fdp)
        added.add(fdp.name)
