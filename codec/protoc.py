"""The one protoc runner of the project: grpcio-tools' protoc with the bundled includes.

Every caller that compiles .proto files (the codec's schema resolution, the registry test
server, the demo, benches and tests) goes through this module, so the include folders
(``codec/_proto`` for Confluent's and Google's extra types, grpcio-tools' well-known types),
the time limit and the error mapping are spelled once.

protoc runs as ``python -m grpc_tools.protoc`` in a subprocess, so its diagnostics can be
captured and a crash of protoc cannot take the caller down.

Raises (every function): `SchemaInvalid` when protoc rejects the files (its first lines of
diagnostics are in the message), `SchemaCompilerUnavailable` when protoc could not run or
failed without judging the files (grpcio-tools missing, killed, slower than
`PROTOC_TIMEOUT_SECONDS`, a Python exception or no output, a source or its output that could
not be written). A `SchemaInvalid` is remembered as the schema's for good and sends its
records to quarantine; a `SchemaCompilerUnavailable` fails the batch, to be tried again
(a protoc that could not start or failed before judging the files is first run again, up to
`PROTOC_TRIES` runs).
"""

from __future__ import annotations

import atexit
import errno
import importlib.resources
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from importlib.resources.abc import Traversable
from pathlib import Path

from google.protobuf import descriptor_pb2

from .errors import SchemaCompilerUnavailable, SchemaInvalid

log = logging.getLogger(__name__)

PROTOC_TIMEOUT_SECONDS = 120
#: runs of protoc before its process's failure fails the caller (see `_invoke`)
PROTOC_TRIES = 3
#: how a Python process that failed with an exception begins its last words
_PYTHON_CRASH = "Traceback (most recent call last):"
#: errors of writing a file that come from the machine, whatever the file's name
_MACHINE_ERRORS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EIO, errno.EROFS}
)


@cache
def shipped_proto_dir() -> Path:
    """The folder of the .proto files shipped with the codec (`codec/_proto`).

    protoc reads include folders from disk. Imported from a zip (spark-submit's
    ``--py-files`` puts one first on the driver's and the executors' path), the package has
    no such folder: its files are then copied once per process into a private temporary
    folder, removed at exit.
    """
    here = Path(__file__).resolve().parent / "_proto"
    if here.is_dir():
        return here
    folder = Path(tempfile.mkdtemp(prefix="protolake-proto-"))
    atexit.register(shutil.rmtree, folder, True)
    _copy_tree(importlib.resources.files(__package__) / "_proto", folder)
    return folder


def _copy_tree(source: Traversable, target: Path) -> None:
    for entry in source.iterdir():
        if entry.is_dir():
            (target / entry.name).mkdir()
            _copy_tree(entry, target / entry.name)
        elif entry.name.endswith(".proto"):
            (target / entry.name).write_bytes(entry.read_bytes())


@cache
def grpc_tools_include_dir() -> Path:
    """The well-known-types include directory bundled with grpcio-tools.

    Raises:
        SchemaCompilerUnavailable: grpcio-tools is not installed here.
    """
    if not protoc_available():
        raise SchemaCompilerUnavailable("grpcio-tools (protoc) is not installed here")
    return Path(str(importlib.resources.files("grpc_tools") / "_proto"))


def protoc_available() -> bool:
    """Whether protoc (grpcio-tools) is installed here; callers that can do without it ask."""
    return importlib.util.find_spec("grpc_tools") is not None


def _proto_files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*.proto")}


@cache
def builtin_file_names() -> frozenset[str]:
    """Import names that resolve without the registry (well-known and shipped types)."""
    names = {
        n for n in _proto_files_under(grpc_tools_include_dir()) if n.startswith("google/protobuf/")
    }
    names |= _proto_files_under(shipped_proto_dir())
    return frozenset(names)


def is_builtin(name: str) -> bool:
    """True when `name` is a well-known or shipped file the codec resolves by itself."""
    return name in builtin_file_names()


@cache
def builtin_file_descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    """Every builtin file compiled once per process (for schemas that came serialized)."""
    raw = run_protoc({}, sorted(builtin_file_names()))
    return descriptor_pb2.FileDescriptorSet.FromString(raw)


def include_args() -> list[str]:
    """The ``-I`` arguments every compilation gets: shipped types, then well-known types."""
    return [f"-I{shipped_proto_dir()}", f"-I{grpc_tools_include_dir()}"]


def run_protoc(
    sources: dict[str, str],
    targets: Iterable[str],
    *,
    descriptor_set_in: bytes | None = None,
    source_info: bool = True,
) -> bytes:
    """Compile .proto texts with protoc; return a FileDescriptorSet with all imports.

    Args:
        sources: file name -> .proto text, written under a temporary include directory.
        targets: the names to compile (their imports are included in the result).
        descriptor_set_in: a serialized FileDescriptorSet of already-compiled imports.
        source_info: keep the source info (see `compile_descriptor_set`).
    """
    with _scratch() as tmp:
        src = Path(tmp, "src")
        src.mkdir()
        _write_sources(src, sources)
        extra = []
        if descriptor_set_in is not None:
            set_in = Path(tmp, "in.pb")
            set_in.write_bytes(descriptor_set_in)
            extra.append(f"--descriptor_set_in={set_in}")
        return compile_descriptor_set(src, targets, extra_args=extra, source_info=source_info)


def compile_descriptor_set(
    proto_dir: Path | str,
    targets: Iterable[str],
    *,
    extra_args: Sequence[str] = (),
    source_info: bool = True,
) -> bytes:
    """Compile the files `targets` (names relative to `proto_dir`) into a FileDescriptorSet.

    The set holds every import (``--include_imports``) and, unless `source_info` is False,
    the source info that carries the .proto comments (silver turns them into column
    comments). Without it a descriptor is what a registry or a generated module holds, so it
    compares equal to theirs. `extra_args` go to protoc before the output flags (more ``-I``
    folders, ``--descriptor_set_in``).
    """
    with _scratch() as tmp:
        out = Path(tmp, "out.pb")
        flags = ["--include_imports", f"--descriptor_set_out={out}"]
        if source_info:
            flags.append("--include_source_info")
        _invoke(Path(proto_dir), [*extra_args, *flags], targets, output=out)
        if not out.exists():  # protoc said yes: what it wrote went missing
            raise SchemaCompilerUnavailable("protoc succeeded but wrote no descriptor set")
        return out.read_bytes()


def generate_python(proto_dir: Path | str, targets: Iterable[str], out_dir: Path | str) -> None:
    """Generate ``*_pb2.py`` modules for `targets` (relative to `proto_dir`) into `out_dir`."""
    _invoke(Path(proto_dir), [f"--python_out={out_dir}"], targets, output=Path(out_dir))


@contextmanager
def _scratch() -> Iterator[Path]:
    """A private temporary folder for protoc's files; the machine's failure to make it or to
    write or read a file in it (an `OSError` in the block) is `SchemaCompilerUnavailable`."""
    try:
        with tempfile.TemporaryDirectory(prefix="protolake-protoc-") as tmp:
            yield Path(tmp)
    except OSError as exc:
        raise SchemaCompilerUnavailable(f"protoc's scratch files: {exc}") from None


def _write_sources(src: Path, sources: dict[str, str]) -> None:
    for name, text in sources.items():
        path = src / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            if exc.errno in _MACHINE_ERRORS:  # a full disk, ...: not the schema's fault
                raise SchemaCompilerUnavailable(
                    f"protoc's sources could not be written: {exc.strerror}"
                ) from None
            # "a" and "a/b.proto": one name is the other's folder
            others = sorted(
                n
                for n in sources
                if n != name and (n.startswith(name + "/") or name.startswith(n + "/"))
            )
            if not others:
                raise SchemaInvalid(f"{name!r} cannot be a file name: {exc.strerror}") from None
            raise SchemaInvalid(
                f"file names clash: {name!r} and {others[0]!r} (one would be the other's folder)"
            ) from None


def _invoke(proto_dir: Path, flags: Sequence[str], targets: Iterable[str], output: Path) -> None:
    """Run protoc; raise as the module docstring says. ``output``: the file or folder protoc
    writes (a diagnostic about it is the machine's, never the schema's). A run that could not
    start or whose process failed before judging the files is tried again, up to
    :data:`PROTOC_TRIES` runs a short pause apart; a run out of time, killed by a signal (the
    out-of-memory killer's, maybe) or unable to write its output is not: another run would
    only add to the machine's trouble."""
    args = [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto_dir}", *include_args()]
    args += [*flags, *targets]
    tries = max(1, PROTOC_TRIES)
    for run in range(1, tries + 1):
        try:
            done = subprocess.run(
                args, capture_output=True, text=True, timeout=PROTOC_TIMEOUT_SECONDS, check=False
            )
            _judge(done, proto_dir, output)
            return
        except subprocess.TimeoutExpired:
            raise SchemaCompilerUnavailable(
                f"protoc did not finish within {PROTOC_TIMEOUT_SECONDS} s"
            ) from None
        except OSError as exc:
            failure = SchemaCompilerUnavailable(f"protoc could not be started: {exc}")
        except _Crashed as exc:
            failure = exc
        if run < tries:
            log.warning("%s; running protoc again (%d of %d)", failure.message, run + 1, tries)
            time.sleep(0.5 * run)
    raise SchemaCompilerUnavailable(failure.message)  # the public kind, whatever the run


class _Crashed(SchemaCompilerUnavailable):
    """protoc's process failed before judging the files: worth another run (:func:`_invoke`)."""


def _judge(done: subprocess.CompletedProcess[str], proto_dir: Path, output: Path) -> None:
    """Raise for a protoc run that failed: `SchemaInvalid` when protoc judged the files."""
    if done.returncode < 0:  # killed by a signal (out of memory, ...): no answer
        raise SchemaCompilerUnavailable(f"protoc was killed by signal {-done.returncode}")
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        lines = said.replace(str(proto_dir) + os.sep, "").splitlines()
        # A line of protoc's own begins with a file name: a traceback's first line is Python's
        # (out of memory, out of file handles, a broken install), a line on the output is
        # the machine's (a full disk); either, or no output at all, says nothing of the schema.
        if not lines or _PYTHON_CRASH in lines:
            last = lines[-1] if lines else f"exit code {done.returncode}, no output"
            raise _Crashed(f"protoc failed before judging the files: {last}")
        on_output = [line for line in said.splitlines() if line.startswith(str(output))]
        if on_output:
            raise SchemaCompilerUnavailable(f"protoc could not write: {on_output[0]}")
        raise SchemaInvalid("schema does not compile: " + " | ".join(lines[:8]))
