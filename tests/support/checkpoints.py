"""Streaming checkpoint files written as Spark writes them, for tests of their readers
(the DAGs' progress probe, bronze's topic router) that must not need a stream to run.

A checkpoint folder holds ``offsets/<batch>`` (the batch is planned: a version line, the
batch's metadata, one JSON line per source) and ``commits/<batch>`` (the batch is done),
each without a final newline, as Spark's ``OffsetSeqLog`` and ``CommitLog`` write them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

COMMIT_LOG = b'v1\n{"nextBatchWatermarkMs":0}'


def offset_log(*sources: dict[str, Any], timestamp_ms: int = 0) -> bytes:
    """The content of ``offsets/<batch>``: one end offset per source, in source order."""
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": timestamp_ms, "conf": {}}
    lines = ["v1", json.dumps(meta), *(json.dumps(s) for s in sources)]
    return "\n".join(lines).encode()


def delta_source_offset(
    reservoir_version: int, index: int = -1, starting: bool = False
) -> dict[str, Any]:
    """A Delta source's offset: ``index`` -1 means version ``reservoir_version`` is the next
    to read; ``starting`` marks the snapshot a query began from."""
    return {
        "sourceVersion": 1,
        "reservoirId": "r",
        "reservoirVersion": reservoir_version,
        "index": index,
        "isStartingVersion": starting,
    }


def checkpoint_batch_files(
    batch: int, *sources: dict[str, Any], committed: bool = True, timestamp_ms: int = 0
) -> dict[str, bytes]:
    """The files of one batch, by path relative to the checkpoint folder."""
    files = {f"offsets/{batch}": offset_log(*sources, timestamp_ms=timestamp_ms)}
    if committed:
        files[f"commits/{batch}"] = COMMIT_LOG
    return files


def write_checkpoint_batch(
    checkpoint: Path,
    batch: int,
    *sources: dict[str, Any],
    committed: bool = True,
    timestamp_ms: int = 0,
) -> None:
    """Write one batch's files into the local checkpoint folder (made when missing)."""
    files = checkpoint_batch_files(batch, *sources, committed=committed, timestamp_ms=timestamp_ms)
    for relative, body in files.items():
        path = checkpoint / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
