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

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError, Message

from .errors import BadPayload
from .generated import generated_class
from .walk import child_messages, fields_of

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


def may_nest_deep(descriptor: Descriptor, levels_above: int = 0) -> bool:
    """True when messages of this type can nest more than DISCARD_DEPTH levels deep, counted
    from ``levels_above`` levels above them (1: inside a wrapper message)."""
    depth: dict[str, int] = {}  # longest chain of levels below each type
    on_path: set[str] = set()

    def longest(desc: Descriptor) -> int:
        name = desc.full_name
        if name in depth:
            return depth[name]
        if name in on_path:
            raise RecursionError  # a cycle: unbounded
        on_path.add(name)
        below = max(
            (1 + longest(f.message_type) for f in fields_of(desc) if f.message_type is not None),
            default=0,
        )
        on_path.discard(name)
        depth[name] = below
        return below

    try:
        return longest(descriptor) + levels_above > DISCARD_DEPTH
    except RecursionError:
        return True


def is_shallow(message_class: type[Message], data: bytes) -> bool:
    """True when `data`, which parses as `message_class`, nests at most DISCARD_DEPTH levels."""
    if len(data) < MIN_DEEP_BYTES:
        return True
    probe = _probe_class(message_class)
    if probe is None:
        return False  # cannot tell: taken as deep, which is always exact (only slower)
    try:
        probe.FromString(_PREFIX + data + _SUFFIX)
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
    probe_class = _probe_class(message_class)
    if probe_class is None:
        return None
    try:
        probe = probe_class.FromString(_PREFIX + data + _SUFFIX)
    except DecodeError:
        return None
    for _ in range(PROBE_LEVELS):
        probe = probe.x  # type: ignore[attr-defined]
    return probe


def discard_unknown(message: Message, deep: bool) -> None:
    """Discard the unknown fields of `message`; at every depth when `deep`.

    Raises:
        BadPayload: deep, and a proto2 map key that is not UTF-8 hides the messages below it.
    """
    message.DiscardUnknownFields()
    if not deep:
        return
    frontier = [message]
    for _ in range(_DEEP_STEP):
        below: list[Message] = []
        for node in frontier:
            for _path, child in child_messages(node):
                if child is None:
                    raise BadPayload(
                        f"{message.DESCRIPTOR.full_name} nests deeper than {DISCARD_DEPTH} "
                        "levels below a map key that is not UTF-8: its unknown fields "
                        "cannot be checked",
                        message_type=message.DESCRIPTOR.full_name,
                    )
                below.append(child)
        frontier = below
    for node in frontier:
        node.DiscardUnknownFields()


def _probe_class(message_class: type[Message]) -> type[Message] | None:
    """``P38 { P37 x = 1 [delimited]; } ... P1 { <message_class> x = 1 [delimited]; }``."""
    return generated_class(message_class, "probe", _add_probe)


def _add_probe(fdp: descriptor_pb2.FileDescriptorProto, inner: str) -> str:
    fdp.syntax = "editions"
    fdp.edition = descriptor_pb2.EDITION_2023
    for level in range(1, PROBE_LEVELS + 1):
        field = fdp.message_type.add(name=f"P{level}").field.add(
            name="x",
            number=1,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
            type_name=inner,
        )
        field.options.features.message_encoding = descriptor_pb2.FeatureSet.DELIMITED
        inner = f".{fdp.package}.P{level}"
    return f"P{PROBE_LEVELS}"
