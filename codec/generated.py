"""Message types protolake generates beside a schema's own, in the schema's descriptor pool:
the batch wrapper of `codec.payload` and the depth probe of `codec.depth`.

Each is built once per (message class, kind) in a file of its own that imports the class's
file, named by a hash of the class's file and full name, so it never clashes with the
schema's types nor with another class's generated types.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable

from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.message import Message

#: build(file, inner) adds messages to `file` (its package and import are set) around the
#: type named `inner` (".full.Name"), and returns the name of the one wanted, unqualified.
Build = Callable[[descriptor_pb2.FileDescriptorProto, str], str]

_CACHE_SIZE = 10_000
_classes: dict[tuple[type[Message], str], type[Message] | None] = {}
_lock = threading.Lock()


def generated_class(message_class: type[Message], kind: str, build: Build) -> type[Message] | None:
    """The generated class `kind` for `message_class`, or None when the pool refuses it (an
    unusual pool then only loses the path that needed it)."""
    key = (message_class, kind)
    try:
        return _classes[key]
    except KeyError:
        pass
    with _lock:
        if key not in _classes:
            if len(_classes) > _CACHE_SIZE:
                _classes.clear()
            try:
                _classes[key] = _build(message_class, kind, build)
            except Exception:  # noqa: BLE001 - see the docstring
                _classes[key] = None
        return _classes[key]


def _build(message_class: type[Message], kind: str, build: Build) -> type[Message]:
    descriptor = message_class.DESCRIPTOR
    pool = descriptor.file.pool
    digest = hashlib.sha256(f"{descriptor.file.name}\0{descriptor.full_name}".encode()).hexdigest()
    fdp = descriptor_pb2.FileDescriptorProto(
        name=f"protolake_{kind}/{digest[:24]}.proto",
        package=f"protolake_{kind}.g{digest[:24]}",
        dependency=[descriptor.file.name],
    )
    wanted = f"{fdp.package}.{build(fdp, f'.{descriptor.full_name}')}"
    try:
        found = pool.FindMessageTypeByName(wanted)  # built before, by another cache
    except KeyError:
        pool.Add(fdp)
        found = pool.FindMessageTypeByName(wanted)
    return message_factory.GetMessageClass(found)
