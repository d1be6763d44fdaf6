"""FileDescriptorProto -> ``.proto`` text: what Confluent answers for the default format.

`render_proto` writes text that protoc compiles back to an equal FileDescriptorProto (the
unit tests round-trip proto2, proto3 and editions files): options (extensions as
``(full.name)``), map fields as ``map<K, V>``, proto2 groups, oneofs, proto3 ``optional``,
reserved ranges and names, extensions and services. Type names stay fully qualified
(``.package.Message``), as they are in a descriptor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

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
        lines += _render_service(service)
    lines += _render_extensions(fdp.extension, syntax, 0)
    return "\n".join(lines) + "\n"


def _render_service(service: Any) -> list[str]:
    lines = [f"service {service.name} {{"]
    for name, literal in _option_pairs(service.options):
        lines.append(f"  option {name} = {literal};")
    for method in service.method:
        cin = "stream " if method.client_streaming else ""
        cout = "stream " if method.server_streaming else ""
        opts = _option_pairs(method.options)
        head = f"  rpc {method.name}({cin}{method.input_type}) returns ({cout}{method.output_type})"
        if opts:
            lines.append(head + " {")
            lines += [f"    option {n} = {v};" for n, v in opts]
            lines.append("  }")
        else:
            lines.append(head + ";")
    lines.append("}")
    return lines


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


class _MessageWriter:
    """Renders one message: its fields (map fields, groups and oneofs included) and nested
    declarations, at an indentation depth."""

    def __init__(self, message: Any, syntax: str, depth: int, parent: str) -> None:
        self.message = message
        self.syntax = syntax
        self.depth = depth
        self.pad = "  " * depth
        # Type names in a descriptor are fully qualified (".package.Outer.Entry"), hence
        # the package (or the enclosing message) in ``parent``.
        self.full = f"{parent}.{message.name}" if parent else message.name
        nested_by_type = {f".{self.full}.{n.name}": n for n in message.nested_type}
        # Map fields refer to synthetic nested *Entry types (map_entry = true): render them
        # as map<K, V> and not as nested messages.
        self.map_entries = {k: n for k, n in nested_by_type.items() if n.options.map_entry}
        # proto2 groups: a GROUP field and the nested type of the same name are written as
        # one "group Name = n { ... }" block.
        self.groups = {
            f.type_name: nested_by_type[f.type_name]
            for f in message.field
            if f.type == _TYPE_GROUP and f.type_name in nested_by_type
        }

    def render(self) -> list[str]:
        message, pad = self.message, self.pad
        lines = [f"{pad}message {message.name} {{"]
        for name, literal in _option_pairs(message.options):
            lines.append(f"{pad}  option {name} = {literal};")
        lines += self._fields()
        group_names = {n.name for n in self.groups.values()}
        for nested in message.nested_type:
            if not nested.options.map_entry and nested.name not in group_names:
                lines += _render_message(nested, self.syntax, self.depth + 1, self.full)
        for enum in message.enum_type:
            lines += _render_enum(enum, self.depth + 1)
        for r in message.extension_range:
            end = "max" if r.end >= 536870912 else str(r.end - 1)
            lines.append(f"{pad}  extensions {r.start} to {end};")
        lines += _render_reserved(
            message.reserved_range, message.reserved_name, pad, inclusive_end=False
        )
        lines += _render_extensions(message.extension, self.syntax, self.depth + 1)
        lines.append(f"{pad}}}")
        return lines

    def _fields(self) -> list[str]:
        """Fields in declaration order; a oneof is written where its first field stands."""
        lines: list[str] = []
        rendered_oneofs: set[int] = set()
        for f in self.message.field:
            if not f.HasField("oneof_index") or f.proto3_optional:
                lines += self._member(f, False, self.pad + "  ")
            elif f.oneof_index not in rendered_oneofs:
                rendered_oneofs.add(f.oneof_index)
                lines += self._oneof(f.oneof_index)
        return lines

    def _oneof(self, index: int) -> list[str]:
        pad = self.pad
        oneof = self.message.oneof_decl[index]
        lines = [f"{pad}  oneof {oneof.name} {{"]
        for name, literal in _option_pairs(oneof.options):
            lines.append(f"{pad}    option {name} = {literal};")
        for other in self.message.field:
            if other.HasField("oneof_index") and other.oneof_index == index:
                lines += self._member(other, True, pad + "    ")
        lines.append(f"{pad}  }}")
        return lines

    def _member(self, f: Any, in_oneof: bool, indent: str) -> list[str]:
        if f.type == _TYPE_GROUP and f.type_name in self.groups:
            nested = self.groups[f.type_name]
            depth = self.depth + (2 if in_oneof else 1)
            body = _render_message(nested, self.syntax, depth, self.full)
            label = _label(f, self.syntax, in_oneof)
            body[0] = f"{indent}{label}group {nested.name} = {f.number}{_field_suffix(f)} {{"
            return body
        return [indent + _render_field(f, self.syntax, self.map_entries, in_oneof=in_oneof)]


def _render_message(message: Any, syntax: str, depth: int, parent: str = "") -> list[str]:
    return _MessageWriter(message, syntax, depth, parent).render()
