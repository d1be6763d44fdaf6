"""The lakehouse's files for readers without a JVM (the Airflow worker): pyarrow for files and
folders, delta-rs' ``storage_options`` for tables.

A :class:`Store` pairs a ``pyarrow.fs.FileSystem`` with the ``storage_options`` ``deltalake``
needs for the same lakehouse; callers keep naming paths as :class:`lakehouse.layout.Layout`
spells them (a local folder, ``file:...``, ``s3a://bucket/key``) and the store translates them
into its file system's form (``bucket/key`` for S3). :meth:`Store.local` reads local folders;
an object-store one is built from the configuration by
``pipelines.settings.object_store.lakehouse_store`` (the one translation of ``[s3]``).

Listing a folder that does not exist gives nothing; other failures of the file system (a
refused credential, ...) are raised as pyarrow raised them (``OSError``), for the caller to
classify. ``pyarrow`` is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from lakehouse.layout import local_path

# The URI schemes a pyarrow S3 file system serves (``bucket/key`` paths once the scheme is off).
OBJECT_STORE_SCHEMES = ("s3a", "s3")


class StoredFile(NamedTuple):
    """A file of a listed folder: its name, its path (as the caller spells paths) and its
    modification time (seconds since the epoch; None when the file system does not say)."""

    name: str
    path: str
    mtime: float | None


@dataclass(frozen=True)
class Store:
    """A lakehouse's file system: ``filesystem`` (a ``pyarrow.fs.FileSystem``) for files,
    ``storage_options`` for ``deltalake``; ``object_store`` when paths are ``s3a://`` URIs.
    Both may hold credentials: neither is part of the ``repr``."""

    filesystem: Any = field(repr=False)
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    object_store: bool = False

    @classmethod
    def local(cls) -> Store:
        """This machine's file system (plain paths and ``file:`` URIs)."""
        from pyarrow import fs

        return cls(fs.LocalFileSystem())

    def fs_path(self, path: str) -> str:
        """``path`` in the file system's own form (``bucket/key``, or an absolute local path).

        Raises:
            ValueError: the path is not one this store serves.
        """
        if self.object_store:
            scheme, _, rest = path.partition("://")
            if scheme.lower() not in OBJECT_STORE_SCHEMES or not rest.strip("/"):
                raise ValueError(f"{path} is not an s3a://bucket/key path")
            return rest.rstrip("/")
        local = local_path(path)
        if local is None:
            raise ValueError(f"{path} is not on this machine (a local path or file: URI)")
        return str(local)

    def serves(self, path: str) -> bool:
        """Whether ``path`` is on this store's file system."""
        if self.object_store:
            return path.partition("://")[0].lower() in OBJECT_STORE_SCHEMES
        return local_path(path) is not None

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a folder (on an object store: a prefix holding objects)."""
        from pyarrow import fs

        return bool(self.filesystem.get_file_info(self.fs_path(path)).type == fs.FileType.Directory)

    def subfolders(self, folder: str) -> list[str]:
        """The folders directly under ``folder`` as ``<folder>/<name>``, sorted (none when
        ``folder`` does not exist)."""
        from pyarrow import fs

        return sorted(
            f"{folder.rstrip('/')}/{_name(info.path)}"
            for info in self._list(folder)
            if info.type == fs.FileType.Directory
        )

    def files(self, folder: str) -> list[StoredFile]:
        """The files directly under ``folder``, sorted by name (none when it does not exist)."""
        from pyarrow import fs

        base = folder.rstrip("/")
        out = [
            StoredFile(
                _name(info.path),
                f"{base}/{_name(info.path)}",
                None if info.mtime is None else info.mtime.timestamp(),
            )
            for info in self._list(folder)
            if info.type == fs.FileType.File
        ]
        return sorted(out)

    def scrub(self, text: str) -> str:
        """``text`` with every credential of the store replaced by ``***`` (for a message
        that quotes a library's error)."""
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            value = self.storage_options.get(key)
            if value:
                text = text.replace(value, "***")
        return text

    def read_text(self, path: str) -> str:
        """The whole file at ``path`` as UTF-8 text."""
        with self.filesystem.open_input_stream(self.fs_path(path)) as stream:
            return bytes(stream.read()).decode("utf-8")

    def _list(self, folder: str) -> list[Any]:
        from pyarrow import fs

        selector = fs.FileSelector(self.fs_path(folder), allow_not_found=True)
        return list(self.filesystem.get_file_info(selector))


def _name(fs_path: str) -> str:
    return fs_path.rstrip("/").rsplit("/", 1)[-1]
