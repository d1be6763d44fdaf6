"""`paused_gc`: pause Python's cyclic garbage collector while a batch is built.

Decoding a batch keeps every message of it alive at once, and each burst of allocations
triggers collections that find nothing to free (decoding makes no reference cycles). The
collector is enabled again when the block ends, even on error, and runs at its next
allocation as usual. The silver job's row converter (`pipelines.proto_types`) uses it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (restored after, even on error)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
