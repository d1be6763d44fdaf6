"""Test kit: compile the test .proto files with protoc (with source info) into message classes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc_tools
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor

PROTO_DIR = Path(__file__).parent / "protos" / "proto_types"
GRPC_INCLUDE = Path(grpc_tools.__file__).parent / "_proto"


def compile_protos(out_dir: Path, *names: str) -> bytes:
    """Run protoc on the test protos; return the FileDescriptorSet (imports, source info)."""
    out = out_dir / "set.pb"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_DIR}",
            f"-I{GRPC_INCLUDE}",
            "--include_imports",
            "--include_source_info",
            f"--descriptor_set_out={out}",
            *names,
        ],
        check=True,
        capture_output=True,
    )
    return out.read_bytes()


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
