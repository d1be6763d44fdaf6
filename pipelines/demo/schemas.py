"""The demo's Protobuf schemas: compiled once per source change, one descriptor pool per version.

The .proto files live in ``pipelines/demo/proto``: ``shop/...`` is schema version 1, and
``evolved/shop/v1/order.proto`` is version 2 of the order file (it shadows version 1; every
other file is shared). :func:`compile_demo_schemas` compiles both with
:func:`codec.protoc.compile_descriptor_set` into descriptor sets cached under
``<cache>/demo_schemas/<hash of the sources>/`` (``<cache>`` is
:func:`pipelines.jobs.cache_dir`).

Message classes are built from the sets in one ``DescriptorPool`` per version: versions 1 and
2 of ``shop/v1/order.proto`` declare the same names, so generated ``_pb2`` modules, which all
share protobuf's default pool, could not hold both in one process.

Raises :class:`DemoStreamError` when protoc rejects the files or cannot run.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from codec.errors import CodecError
from codec.protoc import compile_descriptor_set
from pipelines.demo.stream import DemoStreamError
from pipelines.jobs import cache_dir

SCHEMA_DIR = Path(__file__).resolve().parent / "proto"
EVOLVED_SCHEMA_DIR = SCHEMA_DIR / "evolved"

#: The .proto files compiled for each schema version (imports come along).
PROTO_FILES: tuple[str, ...] = (
    "shop/v1/order.proto",
    "shop/v1/customer.proto",
    "shop/v1/inventory.proto",
)


def _cache_root() -> Path:
    return cache_dir() / "demo_schemas"


def _schema_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(SCHEMA_DIR.rglob("*.proto")):
        digest.update(str(path.relative_to(SCHEMA_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _compile(version: str) -> bytes:
    """One version's descriptor set, without source info (the registry gets the same schema
    text whether or not comments are kept, and the demo needs none)."""
    if version == "v1":
        proto_dir, extra = SCHEMA_DIR, []
    else:
        proto_dir, extra = EVOLVED_SCHEMA_DIR, [f"-I{SCHEMA_DIR}"]
    try:
        raw = compile_descriptor_set(proto_dir, PROTO_FILES, extra_args=extra)
    except CodecError as exc:
        raise DemoStreamError(f"protoc failed for schema {version}: {exc}") from exc
    fds = descriptor_pb2.FileDescriptorSet.FromString(raw)
    for file_proto in fds.file:
        file_proto.ClearField("source_code_info")
    return fds.SerializeToString()


def compile_demo_schemas(cache: str | os.PathLike[str] | None = None) -> dict[str, bytes]:
    """Compile the demo's .proto files; return serialized FileDescriptorSets.

    Returns ``{"v1": ..., "v2": ...}``; each set holds every demo file and its imports. The
    sets are cached by a hash of the .proto sources, in ``cache`` when given.

    Raises:
        DemoStreamError: protoc failed (its message is included).
    """
    root = Path(cache) if cache is not None else _cache_root()
    folder = root / _schema_hash()
    out: dict[str, bytes] = {}
    for version in ("v1", "v2"):
        target = folder / f"{version}.pb"
        if not target.exists():
            data = _compile(version)
            folder.mkdir(parents=True, exist_ok=True)
            # Write to a temporary name and rename: parallel runs must never read half a file.
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, target)
        out[version] = target.read_bytes()
    return out


class SchemaVersion:
    """The demo's message classes of one schema version, in a pool of their own."""

    def __init__(self, name: str, descriptor_set: bytes) -> None:
        self.name = name
        self.pool = descriptor_pool.DescriptorPool()
        fds = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set)
        for file_proto in fds.file:
            self.pool.Add(file_proto)
        self._classes: dict[str, type[Message]] = {}

    def message_class(self, full_name: str) -> type[Message]:
        """The generated class of a fully-qualified message type."""
        cls = self._classes.get(full_name)
        if cls is None:
            cls = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full_name))
            self._classes[full_name] = cls
        return cls


def load_schema_versions(
    cache: str | os.PathLike[str] | None = None,
) -> dict[str, SchemaVersion]:
    """Compile (or reuse) the demo schemas; return ``{"v1": ..., "v2": ...}``."""
    return {name: SchemaVersion(name, fds) for name, fds in compile_demo_schemas(cache).items()}
