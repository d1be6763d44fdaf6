"""Test kit: compile the test .proto files with protoc (with source info) into message classes."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor

from codec.protoc import compile_descriptor_set

PROTO_DIR = Path(__file__).parent / "protos" / "proto_types"


def compile_protos(out_dir: Path, *names: str) -> bytes:
    """Run protoc on the test protos; return the FileDescriptorSet (imports, source info).

    A copy of the set is left in `out_dir` (``set.pb``), to inspect when a test fails.
    """
    fds = compile_descriptor_set(PROTO_DIR, names)
    (out_dir / "set.pb").write_bytes(fds)
    return fds


class Protos:
    """A descriptor pool over one FileDescriptorSet, with shorthand lookups."""

    def __init__(self, fds: bytes) -> None:
        self.fds = fds
        self.pool = descriptor_pool.DescriptorPool()
        for file in descriptor_pb2.FileDescriptorSet.FromString(fds).file:
            self.pool.Add(file)

    def descriptor(self, name: str) -> Descriptor:
        return self.pool.FindMessageTypeByName(name)

    def cls(self, name: str) -> type:
        return message_factory.GetMessageClass(self.descriptor(name))

    def v3(self, name: str) -> type:
        return self.cls(f"protolake.test.v3.{name}")

    def v2(self, name: str) -> type:
        return self.cls(f"protolake.test.v2.{name}")
