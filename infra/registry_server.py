"""A Confluent-Schema-Registry-compatible REST server for local runs and tests (stdlib only).

Contract: it answers the subset of Confluent's REST API (docs.confluent.io, "Schema Registry
API Reference") that producers and consumers use, the way Confluent answers it, so that
confluent-kafka's ``SchemaRegistryClient``/``ProtobufSerializer``/``ProtobufDeserializer``
and protolake's own ``codec.HttpSchemaRegistry`` work against it unchanged:

    GET  /                                  {}
    GET  /schemas/types                     ["AVRO", "JSON", "PROTOBUF"]
    GET  /schemas/ids/{id}[?format=serialized]      {"schema", "schemaType"?, "references"?, "guid"}
    GET  /schemas/guids/{guid}[?format=serialized]  same
    GET  /schemas/ids/{id}/subjects | /versions     subjects / [{"subject", "version"}]
    GET  /subjects[?deleted=true]           subject names
    POST /subjects/{s}/versions             register -> {"id", "guid"} (identical schema -> same id)
    POST /subjects/{s}                      lookup -> {"subject", "version", "id", "guid", "schema", ...}
    GET  /subjects/{s}/versions             [1, 2, ...]
    GET  /subjects/{s}/versions/{v|latest|-1}[/schema|/referencedby]
    DELETE /subjects/{s}[?permanent=true], DELETE /subjects/{s}/versions/{v}[?permanent=true]
    GET|PUT /config, GET|PUT|DELETE /config/{s}, GET /mode, GET /contexts

Responses have content type ``application/vnd.schemaregistry.v1+json``; errors are
``{"error_code": N, "message": "..."}`` with Confluent's codes: 40101 unauthorized,
40401 subject not found, 40402 version not found, 40403 schema not found, 40404 subject
soft-deleted, 40405 subject not soft-deleted first, 40408 no subject-level config,
42201 invalid schema, 42202 invalid version, 42206 schema still referenced, 50003
(injected) unavailable. Subjects are
URL-decoded and may contain ``/`` (the serializer names reference subjects by file name,
e.g. ``shop/common.proto``). ``schemaType`` is omitted for AVRO, as Confluent does.

Protobuf schemas are accepted as ``.proto`` text or as a base64 ``FileDescriptorProto`` (what
confluent-kafka's Python serializer sends). The default format answers ``.proto`` text (a
base64 registration is rendered to text, as Confluent does); ``?format=serialized`` answers
base64 of a ``FileDescriptorProto`` (text is compiled with grpc_tools' protoc against its
references). Invalid schemas are rejected with 42201. Not implemented: compatibility checks
(the configured level is stored and reported, never enforced), schema normalization, contexts
other than the default, metadata and rule sets (accepted and ignored).

Options: HTTP basic auth (``users={"user": "password"}``; 401 otherwise; passwords never
logged), fault injection (``fail_next(n, status=503)``, ``delay_next(n, seconds)``),
``ignore_format_serialized`` (answer text even for ``?format=serialized``, like registries
that ignore the parameter), JSON persistence (``data=path``; written atomically after every
change, reloaded on start), and a request log (``handle.requests``) so tests can assert how
often a client called.

Python API::

    handle = start_registry_server(port=0, users={"alice": "s3cret"})
    handle.url; handle.register("shop.orders-value", proto_text, references=[...]) -> id
    handle.fail_next(2); handle.stop()

Script: ``python infra/registry_server.py --port 8081 --data run/registry.json``.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hmac
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger("protolake.registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
# Imports every Protobuf client resolves itself; never registered as references.
BUILTIN_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")


class RegistryError(Exception):
    """An error answered to the client as ``{"error_code", "message"}`` with an HTTP status."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def _subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def _version_not_found(version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def _schema_not_found(what: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, what)


def _invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {message}")


# ---------------------------------------------------------------------------------------------
# Protobuf support (optional: the protobuf package and grpc_tools; without them, schemas are
# stored as given and ?format=serialized answers what was registered)


def _protobuf() -> Any:
    try:
        from google.protobuf import descriptor_pb2
    except ImportError:  # pragma: no cover - the project venv always has protobuf
        return None
    return descriptor_pb2


def parse_serialized(schema: str) -> Any | None:
    """Return the FileDescriptorProto when ``schema`` is base64 of one, else None (text)."""
    pb = _protobuf()
    if pb is None or not schema or any(c.isspace() for c in schema.strip()):
        return None
    try:
        raw = base64.b64decode(schema.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    fdp = pb.FileDescriptorProto()
    try:
        fdp.ParseFromString(raw)
    except Exception:  # DecodeError: base64 of something else
        return None
    if not (fdp.name or fdp.package or fdp.message_type or fdp.enum_type or fdp.syntax):
        return None
    return fdp


def _builtin_file(name: str) -> Any | None:
    """The FileDescriptorProto of a well-known import (google/protobuf/*, confluent/*)."""
    pb = _protobuf()
    if pb is None:
        return None
    import importlib

    from google.protobuf import descriptor_pool

    modules = {
        "google/protobuf/": "google.protobuf.{}_pb2",
        "confluent/type/": "confluent_kafka.schema_registry.confluent.type.{}_pb2",
        "confluent/": "confluent_kafka.schema_registry.confluent.{}_pb2",
    }
    for prefix, pattern in modules.items():
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
    fdp = pb.FileDescriptorProto()
    fd.CopyToProto(fdp)
    return fdp


def _grpc_include() -> str | None:
    try:
        import grpc_tools
    except ImportError:
        return None
    return os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")


def compile_proto_text(text: str, name: str, dependencies: Sequence[Any]) -> Any:
    """Compile ``.proto`` text with protoc; ``dependencies`` are FileDescriptorProtos by name.

    Returns the FileDescriptorProto of ``name``; raises RegistryError 42201 with protoc's
    message when the text does not compile.
    """
    pb = _protobuf()
    include = _grpc_include()
    if pb is None or include is None:
        raise RuntimeError("grpc_tools is not installed: cannot compile .proto text")
    with tempfile.TemporaryDirectory(prefix="registry-protoc-") as tmp:
        path = os.path.join(tmp, "src", name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        args = [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}/src", f"-I{include}"]
        if dependencies:
            dep_set = pb.FileDescriptorSet(file=list(dependencies))
            dep_path = os.path.join(tmp, "deps.pb")
            with open(dep_path, "wb") as f:
                f.write(dep_set.SerializeToString())
            args.append(f"--descriptor_set_in={dep_path}")
        out = os.path.join(tmp, "out.pb")
        args += [f"--descriptor_set_out={out}", name]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            message = (proc.stderr or proc.stdout).strip().replace(f"{tmp}/src/", "")
            raise _invalid_schema(message or f"protoc exited with {proc.returncode}")
        with open(out, "rb") as f:
            result = pb.FileDescriptorSet.FromString(f.read())
    for fdp in result.file:
        if fdp.name == name:
            return fdp
    raise _invalid_schema(f"protoc produced no descriptor for {name}")


def _validate_descriptor(fdp: Any, dependencies: Sequence[Any]) -> None:
    """Check that a FileDescriptorProto links against its dependencies (42201 otherwise)."""
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    try:
        for item in [*dependencies, fdp]:
            for name in item.dependency:
                if name not in added and name.startswith(BUILTIN_PREFIXES):
                    builtin = _builtin_file(name)
                    if builtin is None:
                        return  # an import we cannot load here: accept as given
                    _add_with_deps(pool, builtin, added)
            if item.name not in added:
                pool.Add(item)
                added.add(item.name)
        pool.FindFileByName(fdp.name)
    except Exception as exc:  # TypeError/KeyError from the pool: unresolved or invalid
        raise _invalid_schema(str(exc)) from None


def _add_with_deps(pool: Any, fdp: Any, added: set[str]) -> None:
    for name in fdp.dependency:
        if name not in added:
            dep = _builtin_file(name)
            if dep is not None:
                _add_with_deps(pool, dep, added)
    if fdp.name not in added:
        pool.Add(fdp)
        added.add(fdp.name)


# --- FileDescriptorProto -> .proto text (what Confluent answers for the default format) ------

_SCALAR_NAMES = {
    1: "double",
    2: "float",
    3: "int64",
    4: "uint64",
    5: "int32",
    6: "fixed64",
    7: "fixed32",
    8: "bool",
    9: "string",
    12: "bytes",
    13: "uint32",
    15: "sfixed32",
    16: "sfixed64",
    17: "sint32",
    18: "sint64",
}
_TYPE_GROUP, _TYPE_MESSAGE, _TYPE_ENUM = 10, 11, 14
_LABEL_OPTIONAL, _LABEL_REQUIRED, _LABEL_REPEATED = 1, 2, 3


def _quote(value: str | bytes) -> str:
    raw = value.encode("utf-8") if isinstance(value, str) else value
    out = []
    for b in raw:
        ch = chr(b)
        if ch in "\"\\'":
            out.append("\\" + ch)
        elif 0x20 <= b < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def _option_literal(fd: Any, value: Any) -> str:
    if fd.type == fd.TYPE_ENUM:
        enum_value = fd.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, bytes)):
        return _quote(value)
    return repr(value) if isinstance(value, float) else str(value)


def _option_pairs(options: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Flatten set options to (dotted name, literal); extensions by (full.name)."""
    pairs: list[tuple[str, str]] = []
    for fd, value in options.ListFields():
        name = f"({fd.full_name})" if fd.is_extension else fd.name
        values = value if fd.is_repeated else [value]
        for item in values:
            if fd.type == fd.TYPE_MESSAGE:
                pairs += _option_pairs(item, f"{prefix}{name}.")
            else:
                pairs.append((f"{prefix}{name}", _option_literal(fd, item)))
    return pairs


def _default_literal(field_proto: Any) -> str:
    value = field_proto.default_value
    if field_proto.type == 9:
        return _quote(value)
    if field_proto.type == 12:
        # protoc stores bytes defaults C-escaped already.
        return '"' + value + '"'
    return value


def render_proto(fdp: Any) -> str:
    """Render a FileDescriptorProto as ``.proto`` text that compiles back to it."""
    lines: list[str] = []
    if fdp.syntax == "editions":
        edition = fdp.DESCRIPTOR.fields_by_name["edition"].enum_type.values_by_number[fdp.edition]
        lines.append(f'edition = "{edition.name.removeprefix("EDITION_")}";')
    else:
        lines.append(f'syntax = "{fdp.syntax or "proto2"}";')
    if fdp.package:
        lines.append(f"package {fdp.package};")
    for i, dep in enumerate(fdp.dependency):
        kind = (
            "public " if i in fdp.public_dependency else "weak " if i in fdp.weak_dependency else ""
        )
        lines.append(f"import {kind}{_quote(dep)};")
    for name, literal in _option_pairs(fdp.options):
        lines.append(f"option {name} = {literal};")
    syntax = fdp.syntax or "proto2"
    for message in fdp.message_type:
        lines += _render_message(message, syntax, 0, fdp.package)
    for enum in fdp.enum_type:
        lines += _render_enum(enum, 0)
    for service in fdp.service:
        lines.append(f"service {service.name} {{")
        for name, literal in _option_pairs(service.options):
            lines.append(f"  option {name} = {literal};")
        for method in service.method:
            cin = "stream " if method.client_streaming else ""
            cout = "stream " if method.server_streaming else ""
            opts = _option_pairs(method.options)
            head = (
                f"  rpc {method.name}({cin}{method.input_type}) "
                f"returns ({cout}{method.output_type})"
            )
            if opts:
                lines.append(head + " {")
                lines += [f"    option {n} = {v};" for n, v in opts]
                lines.append("  }")
            else:
                lines.append(head + ";")
        lines.append("}")
    lines += _render_extensions(fdp.extension, syntax, 0)
    return "\n".join(lines) + "\n"


def _render_extensions(extensions: Iterable[Any], syntax: str, depth: int) -> list[str]:
    by_extendee: dict[str, list[Any]] = {}
    for ext in extensions:
        by_extendee.setdefault(ext.extendee, []).append(ext)
    pad = "  " * depth
    lines: list[str] = []
    for extendee, fields in by_extendee.items():
        lines.append(f"{pad}extend {extendee} {{")
        for ext in fields:
            lines.append(pad + "  " + _render_field(ext, syntax, {}, in_oneof=False))
        lines.append(f"{pad}}}")
    return lines


def _field_suffix(f: Any) -> str:
    options = [(n, v) for n, v in _option_pairs(f.options)]
    if f.HasField("default_value") and f.type not in (_TYPE_MESSAGE, _TYPE_GROUP):
        options.insert(0, ("default", _default_literal(f)))
    if f.HasField("json_name") and f.json_name != _camel(f.name):
        options.append(("json_name", _quote(f.json_name)))
    return (" [" + ", ".join(f"{n} = {v}" for n, v in options) + "]") if options else ""


def _render_field(f: Any, syntax: str, map_entries: Mapping[str, Any], *, in_oneof: bool) -> str:
    suffix = _field_suffix(f)
    if f.type == _TYPE_MESSAGE and f.type_name in map_entries:
        entry = map_entries[f.type_name]
        key, value = entry.field[0], entry.field[1]
        return f"map<{_type_of(key)}, {_type_of(value)}> {f.name} = {f.number}{suffix};"
    return f"{_label(f, syntax, in_oneof)}{_type_of(f)} {f.name} = {f.number}{suffix};"


def _label(f: Any, syntax: str, in_oneof: bool) -> str:
    if in_oneof:
        return ""
    if f.label == _LABEL_REPEATED:
        return "repeated "
    if syntax == "editions":  # presence is a feature there, never a label
        return ""
    if f.label == _LABEL_REQUIRED:
        return "required "
    if syntax == "proto2" or f.proto3_optional:
        return "optional "
    return ""


def _camel(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _type_of(f: Any) -> str:
    if f.type in (_TYPE_MESSAGE, _TYPE_ENUM, _TYPE_GROUP):
        return f.type_name
    return _SCALAR_NAMES[f.type]


def _render_enum(enum: Any, depth: int) -> list[str]:
    pad = "  " * depth
    lines = [f"{pad}enum {enum.name} {{"]
    for name, literal in _option_pairs(enum.options):
        lines.append(f"{pad}  option {name} = {literal};")
    for value in enum.value:
        opts = _option_pairs(value.options)
        suffix = (" [" + ", ".join(f"{n} = {v}" for n, v in opts) + "]") if opts else ""
        lines.append(f"{pad}  {value.name} = {value.number}{suffix};")
    lines += _render_reserved(enum.reserved_range, enum.reserved_name, pad, inclusive_end=True)
    lines.append(f"{pad}}}")
    return lines


def _render_reserved(
    ranges: Iterable[Any], names: Iterable[str], pad: str, *, inclusive_end: bool
) -> list[str]:
    lines = []
    spans = []
    for r in ranges:
        end = r.end if inclusive_end else r.end - 1
        spans.append(str(r.start) if end == r.start else f"{r.start} to {end}")
    if spans:
        lines.append(f"{pad}  reserved {', '.join(spans)};")
    names = list(names)
    if names:
        lines.append(f"{pad}  reserved {', '.join(_quote(n) for n in names)};")
    return lines


def _render_message(message: Any, syntax: str, depth: int, parent: str = "") -> list[str]:
    pad = "  " * depth
    lines = [f"{pad}message {message.name} {{"]
    for name, literal in _option_pairs(message.options):
        lines.append(f"{pad}  option {name} = {literal};")
    # Map fields refer to synthetic nested *Entry types (map_entry = true): render them as
    # map<K, V> and not as nested messages. Type names in a descriptor are fully qualified
    # (".package.Outer.Entry"), hence the package in ``parent``.
    full = f"{parent}.{message.name}" if parent else message.name
    map_entries = {
        f".{full}.{nested.name}": nested
        for nested in message.nested_type
        if nested.options.map_entry
    }
    # proto2 groups: a GROUP field and the nested type of the same name are written as one
    # "group Name = n { ... }" block.
    groups = {
        f.type_name: next(n for n in message.nested_type if f".{full}.{n.name}" == f.type_name)
        for f in message.field
        if f.type == _TYPE_GROUP
        and any(f".{full}.{n.name}" == f.type_name for n in message.nested_type)
    }

    def member(f: Any, in_oneof: bool, indent: str) -> list[str]:
        if f.type == _TYPE_GROUP and f.type_name in groups:
            nested = groups[f.type_name]
            body = _render_message(nested, syntax, depth + (2 if in_oneof else 1), full)
            label = _label(f, syntax, in_oneof)
            body[0] = f"{indent}{label}group {nested.name} = {f.number}{_field_suffix(f)} {{"
            return body
        return [indent + _render_field(f, syntax, map_entries, in_oneof=in_oneof)]

    rendered_oneofs: set[int] = set()
    for f in message.field:
        real_oneof = f.HasField("oneof_index") and not f.proto3_optional
        if not real_oneof:
            lines += member(f, False, pad + "  ")
            continue
        if f.oneof_index in rendered_oneofs:
            continue
        rendered_oneofs.add(f.oneof_index)
        oneof = message.oneof_decl[f.oneof_index]
        lines.append(f"{pad}  oneof {oneof.name} {{")
        for name, literal in _option_pairs(oneof.options):
            lines.append(f"{pad}    option {name} = {literal};")
        for other in message.field:
            if other.HasField("oneof_index") and other.oneof_index == f.oneof_index:
                lines += member(other, True, pad + "    ")
        lines.append(f"{pad}  }}")
    group_names = {n.name for n in groups.values()}
    for nested in message.nested_type:
        if not nested.options.map_entry and nested.name not in group_names:
            lines += _render_message(nested, syntax, depth + 1, full)
    for enum in message.enum_type:
        lines += _render_enum(enum, depth + 1)
    for r in message.extension_range:
        end = "max" if r.end >= 536870912 else str(r.end - 1)
        lines.append(f"{pad}  extensions {r.start} to {end};")
    lines += _render_reserved(
        message.reserved_range, message.reserved_name, pad, inclusive_end=False
    )
    lines += _render_extensions(message.extension, syntax, depth + 1)
    lines.append(f"{pad}}}")
    return lines


# ---------------------------------------------------------------------------------------------
# The store


@dataclass
class StoredSchema:
    """One schema (an id): what was registered, plus derived forms computed once."""

    id: int
    guid: str
    schema_type: str
    schema: str  # as registered
    references: list[dict[str, Any]]
    text: str | None = None  # .proto text (PROTOBUF) for the default format
    serialized: str | None = None  # base64 FileDescriptorProto (PROTOBUF)

    def key(self) -> tuple[str, str, str]:
        return (self.schema_type, self.schema, json.dumps(self.references, sort_keys=True))


@dataclass
class SubjectVersion:
    subject: str
    version: int
    schema_id: int
    deleted: bool = False


@dataclass
class _Fault:
    remaining: int
    status: int = 503
    delay: float = 0.0


class SchemaStore:
    """Subjects, versions and schemas; thread-safe; optionally persisted to a JSON file."""

    def __init__(self, data_path: str | None = None, *, first_id: int = 1) -> None:
        self._lock = threading.RLock()
        self._data_path = data_path
        self.schemas: dict[int, StoredSchema] = {}
        self.by_guid: dict[str, int] = {}
        self.subjects: dict[str, list[SubjectVersion]] = {}
        self.global_compatibility = "BACKWARD"
        self.subject_compatibility: dict[str, str] = {}
        self.next_id = first_id
        if data_path and os.path.exists(data_path):
            self._load(data_path)

    # -- persistence
    def _load(self, path: str) -> None:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        for item in data.get("schemas", []):
            s = StoredSchema(**item)
            self.schemas[s.id] = s
            self.by_guid[s.guid] = s.id
        for subject, versions in data.get("subjects", {}).items():
            self.subjects[subject] = [SubjectVersion(**v) for v in versions]
        self.global_compatibility = data.get("compatibility", "BACKWARD")
        self.subject_compatibility = dict(data.get("subject_compatibility", {}))
        self.next_id = max(data.get("next_id", 1), max(self.schemas, default=0) + 1)

    def _save(self) -> None:
        if not self._data_path:
            return
        data = {
            "schemas": [vars(s) for s in self.schemas.values()],
            "subjects": {k: [vars(v) for v in vs] for k, vs in self.subjects.items()},
            "compatibility": self.global_compatibility,
            "subject_compatibility": self.subject_compatibility,
            "next_id": self.next_id,
        }
        folder = os.path.dirname(os.path.abspath(self._data_path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".registry-", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, self._data_path)  # atomic: a crash never leaves half a file

    # -- lookups
    def live_versions(self, subject: str, *, deleted: bool = False) -> list[SubjectVersion]:
        versions = self.subjects.get(subject)
        if not versions or (not deleted and all(v.deleted for v in versions)):
            raise _subject_not_found(subject)
        return [v for v in versions if deleted or not v.deleted]

    def get_version(self, subject: str, version: str, *, deleted: bool = False) -> SubjectVersion:
        with self._lock:
            versions = self.live_versions(subject, deleted=deleted)
            if version in ("latest", "-1"):
                return versions[-1]
            try:
                number = int(version)
            except ValueError:
                raise RegistryError(
                    422,
                    42202,
                    "The specified version '"
                    + version
                    + "' is not a valid version id. Allowed values are between "
                    '[1, 2^31-1] and the string "latest"',
                ) from None
            if number <= 0:
                raise RegistryError(422, 42202, f"The specified version '{version}' is not valid")
            for v in versions:
                if v.version == number:
                    return v
            raise _version_not_found(number)

    def get_schema(self, schema_id: int) -> StoredSchema:
        with self._lock:
            schema = self.schemas.get(schema_id)
        if schema is None:
            raise _schema_not_found()
        return schema

    def get_schema_by_guid(self, guid: str) -> StoredSchema:
        with self._lock:
            schema_id = self.by_guid.get(guid.lower())
        if schema_id is None:
            raise _schema_not_found()
        return self.get_schema(schema_id)

    # -- registration
    def _normalize_request(self, body: Any) -> tuple[str, str, list[dict[str, Any]]]:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise _invalid_schema("the request needs a 'schema' string")
        schema_type = str(body.get("schemaType") or "AVRO").upper()
        if schema_type not in SCHEMA_TYPES:
            raise RegistryError(422, 42201, f"Invalid schema type {schema_type}")
        references = []
        for ref in body.get("references") or []:
            if not isinstance(ref, dict) or not all(k in ref for k in ("name", "subject")):
                raise _invalid_schema(f"bad reference {ref!r}")
            references.append(
                {
                    "name": str(ref["name"]),
                    "subject": str(ref["subject"]),
                    "version": int(ref.get("version", -1)),
                }
            )
        return schema_type, body["schema"], references

    def _resolve_reference(self, ref: dict[str, Any]) -> StoredSchema:
        try:
            sv = self.get_version(ref["subject"], str(ref["version"]))
        except RegistryError:
            raise _invalid_schema(
                f"reference {ref['name']!r} to subject {ref['subject']!r} version "
                f"{ref['version']} not found"
            ) from None
        return self.schemas[sv.schema_id]

    def _dependency_protos(self, references: list[dict[str, Any]], seen: set[str]) -> list[Any]:
        """FileDescriptorProtos of the references (recursively), each named by its ref name."""
        out = []
        for ref in references:
            if ref["name"] in seen:
                continue
            seen.add(ref["name"])
            stored = self._resolve_reference(ref)
            out += self._dependency_protos(stored.references, seen)
            fdp = self._descriptor_of(stored, ref["name"])
            out.append(fdp)
        return out

    def _descriptor_of(self, stored: StoredSchema, name: str) -> Any:
        pb = _protobuf()
        if stored.serialized is None:
            raise _invalid_schema(f"schema {stored.id} has no descriptor")
        fdp = pb.FileDescriptorProto.FromString(base64.b64decode(stored.serialized))
        fdp.name = name
        return fdp

    def _prepare(
        self, schema_type: str, schema: str, references: list[dict[str, Any]]
    ) -> tuple[str | None, str | None]:
        """Validate a schema; return its (text, serialized) forms (PROTOBUF) or (None, None)."""
        if schema_type in ("AVRO", "JSON"):
            try:
                json.loads(schema)
            except ValueError as exc:
                raise _invalid_schema(f"not JSON: {exc}") from None
            for ref in references:
                self._resolve_reference(ref)
            return None, None
        if _protobuf() is None:  # pragma: no cover - accept as given
            return schema, None
        deps = self._dependency_protos(references, set())
        fdp = parse_serialized(schema)
        if fdp is not None:
            _validate_descriptor(fdp, deps)
            return render_proto(fdp), base64.b64encode(fdp.SerializeToString()).decode("ascii")
        if _grpc_include() is None:  # pragma: no cover - no protoc: accept text unchecked
            return schema, None
        compiled = compile_proto_text(schema, "default.proto", deps)
        return schema, base64.b64encode(compiled.SerializeToString()).decode("ascii")

    def register(self, subject: str, body: Any) -> StoredSchema:
        """POST /subjects/{subject}/versions: a new version, or the existing one if identical."""
        schema_type, schema, references = self._normalize_request(body)
        with self._lock:
            # Pin references to concrete versions ("latest"/-1 resolves now), as Confluent does.
            for ref in references:
                ref["version"] = self.get_version_number(ref)
            key = (schema_type, schema, json.dumps(references, sort_keys=True))
            existing = next((s for s in self.schemas.values() if s.key() == key), None)
            if existing is None:
                text, serialized = self._prepare(schema_type, schema, references)
                existing = StoredSchema(
                    id=self.next_id,
                    guid=str(uuid.uuid4()),
                    schema_type=schema_type,
                    schema=schema,
                    references=references,
                    text=text,
                    serialized=serialized,
                )
                self.next_id += 1
                self.schemas[existing.id] = existing
                self.by_guid[existing.guid] = existing.id
            versions = self.subjects.setdefault(subject, [])
            if not any(v.schema_id == existing.id and not v.deleted for v in versions):
                number = max((v.version for v in versions), default=0) + 1
                versions.append(SubjectVersion(subject, number, existing.id))
            self._save()
            return existing

    def get_version_number(self, ref: dict[str, Any]) -> int:
        version = int(ref["version"])
        if version > 0:
            return version
        try:
            return self.get_version(ref["subject"], "latest").version
        except RegistryError:
            raise _invalid_schema(f"reference subject {ref['subject']!r} not found") from None

    def lookup(self, subject: str, body: Any, *, deleted: bool = False) -> SubjectVersion:
        """POST /subjects/{subject}: the version of this subject holding exactly this schema."""
        schema_type, schema, references = self._normalize_request(body)
        with self._lock:
            versions = self.live_versions(subject, deleted=deleted)
            for ref in references:
                if int(ref["version"]) <= 0:
                    ref["version"] = self.get_version_number(ref)
            key = (schema_type, schema, json.dumps(references, sort_keys=True))
            for v in reversed(versions):
                if self.schemas[v.schema_id].key() == key:
                    return v
        raise _schema_not_found()

    # -- deletion
    def _check_not_referenced(self, subject: str, versions: Iterable[int]) -> None:
        """Confluent refuses to delete a version that a live schema version references."""
        wanted = set(versions)
        for other, svs in self.subjects.items():
            for sv in svs:
                if sv.deleted:
                    continue
                for ref in self.schemas[sv.schema_id].references:
                    if ref["subject"] == subject and int(ref["version"]) in wanted:
                        raise RegistryError(
                            422,
                            42206,
                            f"One or more references exist to the schema "
                            f"{{subject={subject},version={ref['version']}}} "
                            f"(referenced by {other} version {sv.version})",
                        )

    def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        with self._lock:
            versions = self.subjects.get(subject)
            if not versions:
                raise _subject_not_found(subject)
            if permanent:
                if any(not v.deleted for v in versions):
                    raise RegistryError(
                        404,
                        40405,
                        f"Subject '{subject}' was not deleted first before being permanently deleted",
                    )
                del self.subjects[subject]
                self.subject_compatibility.pop(subject, None)
                numbers = [v.version for v in versions]
            else:
                live = [v for v in versions if not v.deleted]
                if not live:
                    raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.")
                self._check_not_referenced(subject, [v.version for v in live])
                for v in live:
                    v.deleted = True
                numbers = [v.version for v in live]
            self._save()
            return numbers

    def delete_version(self, subject: str, version: str, *, permanent: bool) -> int:
        with self._lock:
            sv = self.get_version(subject, version, deleted=permanent)
            if permanent:
                if not sv.deleted:
                    raise RegistryError(
                        404,
                        40407,
                        f"Subject '{subject}' Version {sv.version} was not deleted first before "
                        "being permanently deleted",
                    )
                self.subjects[subject].remove(sv)
                if not self.subjects[subject]:
                    del self.subjects[subject]
            else:
                self._check_not_referenced(subject, [sv.version])
                sv.deleted = True
            self._save()
            return sv.version

    def set_compatibility(self, subject: str | None, body: Any) -> str:
        level = str((body or {}).get("compatibility", "")).upper()
        if level not in COMPATIBILITY_LEVELS:
            raise RegistryError(422, 42203, "Invalid compatibility level")
        with self._lock:
            if subject is None:
                self.global_compatibility = level
            else:
                self.subject_compatibility[subject] = level
            self._save()
        return level


# ---------------------------------------------------------------------------------------------
# HTTP


def _schema_body(stored: StoredSchema, fmt: str | None, ignore_format: bool) -> dict[str, Any]:
    """The schema fields of a response, in the format asked for."""
    if stored.schema_type == "PROTOBUF":
        if fmt == "serialized" and not ignore_format and stored.serialized is not None:
            schema = stored.serialized
        else:
            schema = stored.text if stored.text is not None else stored.schema
    else:
        schema = stored.schema
    body: dict[str, Any] = {}
    if stored.schema_type != "AVRO":
        body["schemaType"] = stored.schema_type
    body["schema"] = schema
    if stored.references:
        body["references"] = [dict(r) for r in stored.references]
    return body


@dataclass
class ServerState:
    store: SchemaStore
    users: dict[str, str] | None = None
    ignore_format_serialized: bool = False
    faults: list[_Fault] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_fault(self) -> _Fault | None:
        with self.lock:
            while self.faults and self.faults[0].remaining <= 0:
                self.faults.pop(0)
            if not self.faults:
                return None
            fault = self.faults[0]
            fault.remaining -= 1
            return fault


class RegistryRequestHandler(BaseHTTPRequestHandler):
    """Routes Confluent's REST paths to the store; answers JSON or a Confluent error body."""

    server_version = "protolake-registry/1"
    protocol_version = "HTTP/1.1"
    state: ServerState  # set on the server class by start_registry_server

    # -- plumbing
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        # The request line only (never headers: they carry the Authorization secret).
        log.info("%s %s", self.address_string(), format % args)

    def _send(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        payload = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _send_error(self, err: RegistryError, headers: Mapping[str, str] | None = None) -> None:
        self._send(err.status, {"error_code": err.error_code, "message": err.message}, headers)

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise RegistryError(400, 400, "Unrecognized JSON body") from None

    def _authorized(self) -> bool:
        users = self.state.users
        if not users:
            return True
        header = self.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:]).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        expected = users.get(user)
        return expected is not None and hmac.compare_digest(expected, password)

    def _handle(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        # Split before decoding: a subject's '/' arrives as %2F and must stay in one segment.
        parts = [unquote(p) for p in url.path.split("/") if p]
        with self.state.lock:
            self.state.requests.append((self.command, url.path))
        body = self._read_body() if self.command in ("POST", "PUT") else None
        if not self._authorized():
            self._send_error(
                RegistryError(401, 40101, "Unauthorized"),
                {"WWW-Authenticate": 'Basic realm="schema-registry"'},
            )
            return
        fault = self.state.next_fault()
        if fault is not None:
            if fault.delay:
                time.sleep(fault.delay)
            if fault.status:
                self._send_error(
                    RegistryError(fault.status, fault.status * 100 + 3, "injected fault")
                )
                return
        try:
            status, result = self._route(self.command, parts, query, body)
        except RegistryError as err:
            self._send_error(err)
            return
        except Exception as exc:  # a bug here must answer 500, not drop the connection
            log.exception("internal error")
            self._send_error(RegistryError(500, 50001, f"Error in the backend data store: {exc}"))
            return
        self._send(status, result)

    do_GET = do_POST = do_PUT = do_DELETE = _handle  # noqa: N815 - stdlib naming

    # -- routes
    def _route(
        self, method: str, parts: list[str], query: dict[str, str], body: Any
    ) -> tuple[int, Any]:
        store = self.state.store
        fmt = query.get("format")
        deleted = query.get("deleted", "false").lower() == "true"
        permanent = query.get("permanent", "false").lower() == "true"
        ignore_fmt = self.state.ignore_format_serialized
        n = len(parts)
        if n == 0 and method == "GET":
            return 200, {}
        head = parts[0] if parts else ""
        if head == "schemas" and method == "GET":
            if n == 2 and parts[1] == "types":
                return 200, list(SCHEMA_TYPES)
            if n >= 3 and parts[1] in ("ids", "guids"):
                if parts[1] == "ids":
                    try:
                        stored = store.get_schema(int(parts[2]))
                    except ValueError:
                        raise _schema_not_found() from None
                else:
                    stored = store.get_schema_by_guid(parts[2])
                if n == 3:
                    result = _schema_body(stored, fmt, ignore_fmt)
                    result["guid"] = stored.guid
                    return 200, result
                if n == 4 and parts[3] == "schema":
                    return 200, _schema_body(stored, fmt, ignore_fmt)["schema"]
                if n == 4 and parts[3] in ("subjects", "versions"):
                    with store._lock:
                        pairs = [
                            (s, v.version)
                            for s, vs in store.subjects.items()
                            for v in vs
                            if v.schema_id == stored.id and (deleted or not v.deleted)
                        ]
                    if parts[3] == "subjects":
                        return 200, sorted({s for s, _ in pairs})
                    return 200, [{"subject": s, "version": v} for s, v in pairs]
        if head == "subjects":
            return self._route_subjects(method, parts, query, body, fmt, deleted, permanent)
        if head == "config":
            if n == 1 and method == "GET":
                return 200, {"compatibilityLevel": store.global_compatibility}
            if n == 1 and method == "PUT":
                return 200, {"compatibility": store.set_compatibility(None, body)}
            if n == 2:
                subject = parts[1]
                if method == "GET":
                    level = store.subject_compatibility.get(subject)
                    if level is None:
                        if query.get("defaultToGlobal", "false").lower() == "true":
                            level = store.global_compatibility
                        else:
                            raise RegistryError(
                                404,
                                40408,
                                f"Subject '{subject}' does not have subject-level compatibility "
                                "configured",
                            )
                    return 200, {"compatibilityLevel": level}
                if method == "PUT":
                    return 200, {"compatibility": store.set_compatibility(subject, body)}
                if method == "DELETE":
                    with store._lock:
                        level = store.subject_compatibility.pop(subject, None)
                        store._save()
                    if level is None:
                        raise _subject_not_found(subject)
                    return 200, {"compatibilityLevel": level}
        if head == "mode" and method == "GET":
            return 200, {"mode": "READWRITE"}
        if head == "contexts" and method == "GET" and n == 1:
            return 200, ["."]
        raise RegistryError(404, 404, "HTTP 404 Not Found")

    def _route_subjects(
        self,
        method: str,
        parts: list[str],
        query: dict[str, str],
        body: Any,
        fmt: str | None,
        deleted: bool,
        permanent: bool,
    ) -> tuple[int, Any]:
        store = self.state.store
        ignore_fmt = self.state.ignore_format_serialized
        n = len(parts)
        if n == 1 and method == "GET":
            prefix = query.get("subjectPrefix", "")
            with store._lock:
                names = [
                    s
                    for s, vs in store.subjects.items()
                    if s.startswith(prefix) and (deleted or any(not v.deleted for v in vs))
                ]
            return 200, sorted(names)
        if n < 2:
            raise RegistryError(404, 404, "HTTP 404 Not Found")
        subject = parts[1]
        if n == 2 and method == "POST":
            sv = store.lookup(subject, body, deleted=deleted)
            stored = store.get_schema(sv.schema_id)
            return 200, self._version_body(sv, stored, fmt, ignore_fmt)
        if n == 2 and method == "DELETE":
            return 200, store.delete_subject(subject, permanent=permanent)
        if n == 3 and parts[2] == "versions":
            if method == "GET":
                with store._lock:
                    return 200, [v.version for v in store.live_versions(subject, deleted=deleted)]
            if method == "POST":
                stored = store.register(subject, body)
                return 200, {"id": stored.id, "guid": stored.guid}
        if n >= 4 and parts[2] == "versions":
            if n == 4 and method == "DELETE":
                return 200, store.delete_version(subject, parts[3], permanent=permanent)
            if method == "GET":
                sv = store.get_version(subject, parts[3], deleted=deleted)
                stored = store.get_schema(sv.schema_id)
                if n == 4:
                    return 200, self._version_body(sv, stored, fmt, ignore_fmt)
                if n == 5 and parts[4] == "schema":
                    return 200, _schema_body(stored, fmt, ignore_fmt)["schema"]
                if n == 5 and parts[4] == "referencedby":
                    with store._lock:
                        ids = sorted(
                            s.id
                            for s in store.schemas.values()
                            if any(
                                r["subject"] == subject and r["version"] == sv.version
                                for r in s.references
                            )
                        )
                    return 200, ids
        raise RegistryError(404, 404, "HTTP 404 Not Found")

    @staticmethod
    def _version_body(
        sv: SubjectVersion, stored: StoredSchema, fmt: str | None, ignore_fmt: bool
    ) -> dict[str, Any]:
        result: dict[str, Any] = {
            "subject": sv.subject,
            "version": sv.version,
            "id": stored.id,
            "guid": stored.guid,
        }
        result.update(_schema_body(stored, fmt, ignore_fmt))
        return result


# ---------------------------------------------------------------------------------------------
# Python API


class RegistryServerHandle:
    """A running server: ``.url``, ``.stop()``, fault injection, direct registration."""

    def __init__(self, server: ThreadingHTTPServer, thread: threading.Thread, state: ServerState):
        self._server = server
        self._thread = thread
        self.state = state
        host, port = server.server_address[:2]
        self.host = str(host)
        self.port = int(port)
        self.url = f"http://{self.host}:{self.port}"

    def __repr__(self) -> str:  # never the users' passwords
        return f"RegistryServerHandle(url={self.url!r})"

    def __enter__(self) -> RegistryServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def store(self) -> SchemaStore:
        return self.state.store

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(method, path) of every request received so far, oldest first."""
        with self.state.lock:
            return list(self.state.requests)

    def clear_requests(self) -> None:
        with self.state.lock:
            self.state.requests.clear()

    def fail_next(self, n: int, status: int = 503) -> None:
        """Answer the next ``n`` requests with ``status`` (Confluent error body, code status*100+3)."""
        with self.state.lock:
            self.state.faults.append(_Fault(remaining=n, status=status))

    def delay_next(self, n: int, seconds: float, status: int = 0) -> None:
        """Delay the next ``n`` responses by ``seconds`` (then answer normally, or ``status``)."""
        with self.state.lock:
            self.state.faults.append(_Fault(remaining=n, status=status, delay=seconds))

    def clear_faults(self) -> None:
        with self.state.lock:
            self.state.faults.clear()

    def register(
        self,
        subject: str,
        schema_text: str,
        references: Iterable[Mapping[str, Any] | tuple[str, str, int]] = (),
        schema_type: str = "PROTOBUF",
    ) -> int:
        """Register directly (same validation as POST); return the schema id."""
        refs = [
            dict(r) if isinstance(r, Mapping) else {"name": r[0], "subject": r[1], "version": r[2]}
            for r in references
        ]
        body = {"schema": schema_text, "schemaType": schema_type, "references": refs}
        return self.state.store.register(subject, body).id

    def guid_of(self, schema_id: int) -> str:
        return self.state.store.get_schema(schema_id).guid

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def start_registry_server(
    port: int = 0,
    *,
    host: str = "127.0.0.1",
    users: Mapping[str, str] | Iterable[str] | None = None,
    data: str | None = None,
    ignore_format_serialized: bool = False,
    first_id: int = 1,
) -> RegistryServerHandle:
    """Start a server in a daemon thread and return its handle (``port=0``: a free port).

    Args:
        users: basic-auth users, ``{"user": "password"}`` or ``["user:password", ...]``;
            None means no authentication.
        data: JSON file to load from and persist to (None: memory only).
        ignore_format_serialized: answer ``.proto`` text even for ``?format=serialized``.
        first_id: the id the first schema gets (Confluent starts at 1).
    """
    state = ServerState(
        store=SchemaStore(data, first_id=first_id),
        users=_parse_users(users),
        ignore_format_serialized=ignore_format_serialized,
    )
    handler = type("BoundRegistryRequestHandler", (RegistryRequestHandler,), {"state": state})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, name=f"registry-{server.server_address[1]}", daemon=True
    )
    thread.start()
    return RegistryServerHandle(server, thread, state)


def _parse_users(users: Mapping[str, str] | Iterable[str] | None) -> dict[str, str] | None:
    if users is None:
        return None
    if isinstance(users, Mapping):
        return {str(k): str(v) for k, v in users.items()}
    parsed = {}
    for item in users:
        user, sep, password = item.partition(":")
        if not sep:
            raise ValueError("users must be 'user:password' strings")
        parsed[user] = password
    return parsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Confluent-compatible schema registry (local).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--data", default=None, help="JSON file to persist schemas to")
    parser.add_argument(
        "--users-env",
        default=None,
        help="name of an environment variable holding 'user:pass[,user:pass]' for basic auth",
    )
    parser.add_argument("--ignore-format-serialized", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    users = None
    if args.users_env:
        users = [u for u in os.environ.get(args.users_env, "").split(",") if u]
    handle = start_registry_server(
        args.port,
        host=args.host,
        users=users,
        data=args.data,
        ignore_format_serialized=args.ignore_format_serialized,
    )
    log.info("schema registry listening on %s (data %s)", handle.url, args.data or "memory")
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    stopped.wait()
    handle.stop()
    log.info("schema registry stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
