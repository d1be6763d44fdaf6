"""lakehouse.store on this machine's file system: folders, files with their times, text, and
paths it does not serve (the object-store side runs against SeaweedFS in
tests/integration/s3/test_s3_dag_readers.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lakehouse.store import Store, StoredFile


def test_a_local_folder_is_listed_and_read(tmp_path: Path) -> None:
    (tmp_path / "b_table").mkdir()
    (tmp_path / "a_table").mkdir()
    (tmp_path / "10").write_text("ten")
    (tmp_path / "2").write_text("v1\n{}\n")
    os.utime(tmp_path / "2", (1_000_000, 1_000_000))
    os.utime(tmp_path / "10", (2_000_000, 2_000_000))
    store = Store.local()
    folder = f"file://{tmp_path}"
    assert store.subfolders(str(tmp_path)) == [f"{tmp_path}/a_table", f"{tmp_path}/b_table"]
    assert store.files(folder) == [
        StoredFile("10", f"{folder}/10", 2_000_000.0),
        StoredFile("2", f"{folder}/2", 1_000_000.0),
    ]
    assert store.read_text(f"{folder}/2") == "v1\n{}\n"
    assert store.is_dir(folder) and not store.is_dir(f"{folder}/2")
    assert store.files(f"{tmp_path}/missing") == [] == store.subfolders(f"{tmp_path}/missing")
    assert not store.is_dir(f"{tmp_path}/missing")


def test_a_local_store_does_not_serve_object_store_paths() -> None:
    store = Store.local()
    assert store.serves("/tmp/x") and store.serves("file:///tmp/x")
    assert not store.serves("s3a://bucket/x")
    with pytest.raises(ValueError, match="is not on this machine"):
        store.fs_path("s3a://bucket/x")
