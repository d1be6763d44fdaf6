"""The machine's cache folder: what is built once per machine and shared by every checkout.

``$PROTOLAKE_SHARED_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/protolake``: the same folder as
set-up's (``infra/machine_cache.sh``), which keeps the jars, SeaweedFS and wheels there.
Python keeps the compiled decoder (``pipelines.proto_types._library``) and the test suite's
class archive (``tests/support/jvm_archive.py``) in it.
"""

from __future__ import annotations

import os
from pathlib import Path


def machine_cache_dir(subfolder: str = "") -> Path:
    """The machine's cache folder (or ``subfolder`` of it); not created here."""
    root = os.environ.get("PROTOLAKE_SHARED_CACHE")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = str(Path(base) / "protolake")
    folder = Path(os.path.abspath(root))  # as the shell's `cd "$dir" && pwd` spells it
    return folder / subfolder if subfolder else folder
