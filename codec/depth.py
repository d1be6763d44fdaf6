"""Unknown fields nested deeper than protobuf's discard reaches.

upb's ``DiscardUnknownFields`` stops 62 levels below the message it is called on (measured
with protobuf 7.36: unknown fields at nesting level 63 and deeper are kept), while its parser
accepts messages nested down to level 100. The unknown-field checks of `codec.payload` rest
on discarding, so a message nested deeper than 62 levels could hide unknown fields from them.
Only types that can nest that deep are concerned: recursive ones (``google.protobuf.Value``,
a tree) or, in theory, a chain of more than 62 distinct types.

For those, `is_shallow` asks protobuf's own parser whether a payload nests more than 62
levels: the payload is parsed as the innermost of `PROBE_LEVELS` delimited (group-encoded)
levels, which need no lengths, so the prefix and suffix are constant bytes; the parse fails
on depth exactly when the payload nests deeper than 62 levels. A deep message then has its
unknown fields discarded by `discard_unknown(message, deep=True)`, which also calls protobuf
on every message 50 levels down (50 + 62 > 100, the deepest a parse accepts).
"""

from __future__ import annotations

import hashlib
import threading

from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError, Message

#: Levels below a message that ``DiscardUnknownFields`` reaches.
DISCARD_DEPTH = 62
#: Levels above the root in a probe: a parse accepts 100 levels, so a payload parses
#: inside the probe if and only if it nests at most 100 - PROBE_LEVELS = 62 levels.
PROBE_LEVELS = 38
#: Every level of nesting costs at least two bytes (a tag and a length or an end tag), so a
#: shorter payload cannot nest deeper than DISCARD_DEPTH.
MIN_DEEP_BYTES = 2 * DISCARD_DEPTH
_DEEP_STEP = 50

_PREFIX = b"\x0b" * PROBE_LEVELS  # field 1, start group
_SUFFIX = b"\x0c" * PROBE_LEVELS  # field 1, end group
_probes: dict[type[Message], type[Message]] = {}
_probe_lock = threading.Lock()


def may_nest_deep(descriptor: Descriptor) -> bool:
    """True when messages of this type can nest more than DISCARD_DEPTH levels deep."""
    pool = descriptor.file.pool
    depth: dict[str, int] = {}  # longest chain of levels below each type
    on_path: set[str] = set()

    def longest(desc: Descriptor) -> int:
        name = desc.full_name
        if name in depth:
            return depth[name]
        if name in on_path:
            raise RecursionError  # a cycle: unbounded
        on_path.add(name)
        fields = list(desc.fields)
        if desc.extension_ranges:
            fields += pool.FindAllExtensions(desc)
        below = max(
            (1 + longest(f.message_type) for f in fields if f.message_type is not None),
            default=0,
        )
        on_path.discard(name)
        depth[name] = below
        return below

    try:
        return longest(descriptor) > DISCARD_DEPTH
    except RecursionError:
        return True


def is_shallow(message_class: type[Message], data: bytes) -> bool:
    """True when `data`, which parses as `message_class`, nests at most DISCARD_DEPTH levels."""
    if len(data) < MIN_DEEP_BYTES:
        return True
    try:
        _probe_class(message_class).FromString(_PREFIX + data + _SUFFIX)
    except DecodeError:
        return False
    return True


def parse_shallow(message_class: type[Message], data: bytes) -> Message | None:
    """`message_class.FromString(data)`, or None when the bytes do not parse or nest deeper
    than DISCARD_DEPTH levels."""
    if len(data) < MIN_DEEP_BYTES:
        try:
            return message_class.FromString(data)
        except DecodeError:
            return None
    try:
        probe = _probe_class(message_class).FromString(_PREFIX + data + _SUFFIX)
    except DecodeError:
        return None
    for _ in range(PROBE_LEVELS):
        probe = probe.x  # type: ignore[attr-defined]
    return probe


def discard_unknown(message: Message, deep: bool) -> None:
    """Discard the unknown fields of `message`; at every depth when `deep`."""
    message.DiscardUnknownFields()
    if not deep:
        return
    frontier = [message]
    for _ in range(_DEEP_STEP):
        below: list[Message] = []
        for node in frontier:
            for field, value in node.ListFields():
                if field.message_type is None:
                    continue
                if field.message_type.GetOptions().map_entry:
                    if field.message_type.fields_by_name["value"].message_type is not None:
                        below.extend(value.values())
                elif field.is_repeated:
                    below.extend(value)
                else:
                    below.append(value)
        frontier = below
    for node in frontier:
        node.DiscardUnknownFields()


def _probe_class(message_class: type[Message]) -> type[Message]:
    """``P38 { P37 x = 1 [delimited]; } ... P1 { <message_class> x = 1 [delimited]; }``."""
    probe = _probes.get(message_class)
    if probe is not None:
        return probe
    with _probe_lock:
        descriptor = message_class.DESCRIPTOR
        pool = descriptor.file.pool
        digest = hashlib.sha256(
            f"{descriptor.file.name}\0{descriptor.full_name}".encode()
        ).hexdigest()[:24]
        package = f"protolake_probe.p{digest}"
        try:
            found = pool.FindMessageTypeByName(f"{package}.P{PROBE_LEVELS}")
        except KeyError:
            fdp = descriptor_pb2.FileDescriptorProto(
                name=f"protolake_probe/{digest}.proto",
                package=package,
                syntax="editions",
                edition=descriptor_pb2.EDITION_2023,
                dependency=[descriptor.file.name],
            )
            inner = f".{descriptor.full_name}"
            for level in range(1, PROBE_LEVELS + 1):
                field = fdp.message_type.add(name=f"P{level}").field.add(
                    name="x",
                    number=1,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
                    type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                    type_name=inner,
                )
                field.options.features.message_encoding = descriptor_pb2.FeatureSet.DELIMITED
                inner = f".{package}.P{level}"
            pool.Add(fdp)
            found = pool.FindMessageTypeByName(f"{package}.P{PROBE_LEVELS}")
        probe = message_factory.GetMessageClass(found)
        _probes[message_class] = probe
        return probe
