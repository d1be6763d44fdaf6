"""Building and loading the compiled decoder (``wire2arrow.c``), once per process.

The C file ships inside the package (and so inside the ``--py-files`` zip). It is compiled
with the system C compiler (``$CC``, else ``cc``/``gcc``) once per source version and machine
type into ``$PROTOLAKE_NATIVE_CACHE`` (default ``native`` in the machine's cache,
:func:`pipelines.machine_cache.machine_cache_dir`; else the temp folder), on each machine that
needs it, executors included. With no compiler, or with ``PROTOLAKE_NATIVE=0``,
:func:`library` is None: one warning, and the upb path runs.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from importlib import resources
from pathlib import Path
from typing import Any

from pipelines.machine_cache import machine_cache_dir

log = logging.getLogger("pipelines.proto_types._native")

_LIB_LOCK = threading.Lock()
_LIB: list[Any] = []  # [ctypes.CDLL or None], filled once per process


def _cache_dir() -> Path:
    configured = os.environ.get("PROTOLAKE_NATIVE_CACHE")
    candidates = [Path(configured)] if configured else []
    candidates += [machine_cache_dir("native")]
    candidates += [Path(tempfile.gettempdir()) / f"protolake-native-{os.getuid()}"]
    for folder in candidates:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if os.access(folder, os.W_OK):
                return folder
        except OSError:
            continue
    raise OSError("no writable folder for the compiled decoder")


def _compile(source: bytes) -> Path:
    tag = hashlib.sha256(source + platform.machine().encode()).hexdigest()[:16]
    folder = _cache_dir()
    target = folder / f"wire2arrow-{tag}.so"
    if target.is_file():
        return target
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        raise OSError("no C compiler (set CC, or install gcc)")
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        src = Path(tmp) / "wire2arrow.c"
        src.write_bytes(source)
        out = Path(tmp) / target.name
        cmd = [compiler, "-O2", "-std=gnu99", "-shared", "-fPIC", "-o", str(out), str(src)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise OSError(f"{compiler} failed: {done.stderr.strip()[:500]}")
        os.replace(out, target)  # atomic: a concurrent worker never loads half a file
    return target


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    p, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    lib.w2a_plan_new.restype = p
    lib.w2a_plan_new.argtypes = [i32, p, i32, p, i32, p, i32, p, i32, p]
    lib.w2a_plan_free.argtypes = [p]
    lib.w2a_decode.restype = p
    lib.w2a_decode.argtypes = [p, p, p, p, i64, p, ctypes.POINTER(i64)]
    lib.w2a_result_free.argtypes = [p]
    lib.w2a_count.restype = i64
    lib.w2a_count.argtypes = [p, i32]
    lib.w2a_buffer.restype = p
    lib.w2a_buffer.argtypes = [p, i32, i32, ctypes.POINTER(i64)]
    return lib


def library() -> ctypes.CDLL | None:
    """The compiled decoder, or None (disabled, or no compiler: logged once)."""
    with _LIB_LOCK:
        if not _LIB:
            lib = None
            if os.environ.get("PROTOLAKE_NATIVE", "1") == "0":
                log.info("native decoder disabled (PROTOLAKE_NATIVE=0)")
            else:
                try:
                    source = resources.files(__package__).joinpath("wire2arrow.c").read_bytes()
                    lib = _bind(ctypes.CDLL(str(_compile(source))))
                except OSError as exc:
                    log.warning("native decoder unavailable, using the upb path: %s", exc)
            _LIB.append(lib)
        return _LIB[0]
