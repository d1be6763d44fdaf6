"""A schema registry backed by a folder of .proto files, for offline use and the demo.

Layout::

    <folder>/
      index.json            the ids, GUIDs and subjects (below)
      shop/order.proto      schema files, each at its import path
      shop/common.proto

`index.json`::

    {"schemas": [
      {"id": 1, "guid": "0f8fad5b-d9cb-469f-a165-70867728950e",
       "subject": "orders-value", "version": 1, "file": "shop/order.proto"},
      {"id": 2, "subject": "shop/common.proto", "file": "shop/common.proto",
       "references": []}
    ]}

Per entry: `file` is required (a path inside the folder, which is also its import path);
`id` (an integer) and `guid` (any form `uuid.UUID` reads) are optional but must be unique;
`subject` defaults to the file path, `version` to 1, `schema_type` to "PROTOBUF". A mistake in
the index (a wrong type, a file that is not there) is a `ValueError` when the registry is
opened, never a schema that is silently not found.
`references` may be omitted: the file's imports are then found by compiling it (protoc, with
the folder as include path), and every import that is not a builtin (well-known) file becomes a
reference named by the import path, with the subject and version of the entry for that file,
or subject = import path and version 1 when the file has no entry. Any .proto file in the
folder is reachable as subject = its path, version 1, so imports need no entry of their own.

The same errors as a real registry: `UnknownSchema` (with Confluent's error codes 40403 for an
id or GUID, 40401 for a subject, 40402 for a version).
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from google.protobuf import descriptor_pb2

from .errors import RegistryUnavailable, SchemaInvalid, UnknownSchema
from .protoc import is_builtin, run_protoc
from .registry import RegisteredSchema, SchemaReference

INDEX_FILE = "index.json"


class DirectorySchemaRegistry:
    """`SchemaRegistry` over a folder of .proto files and an `index.json` (see module doc)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        if not self.path.is_dir():
            raise ValueError(f"schema folder {self.path} does not exist")
        self._entries = self._read_index()
        self._by_id = {e["id"]: e for e in self._entries if e.get("id") is not None}
        self._by_guid = {e["guid"]: e for e in self._entries if e.get("guid")}
        self._by_subject = {(e["subject"], e["version"]): e for e in self._entries}
        self._by_file = {e["file"]: e for e in self._entries}
        self._imports: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DirectorySchemaRegistry(path={str(self.path)!r})"

    def _read_index(self) -> list[dict[str, Any]]:
        """The index's entries, checked: a mistake in it is a clear `ValueError` here, not
        a schema that is silently never found (or an exception) when a record asks."""
        index = self.path / INDEX_FILE
        if not index.exists():
            return []
        try:
            data = json.loads(index.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"{index} is not JSON: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("schemas", []), list):
            raise ValueError(f'{index} must be an object {{"schemas": [...]}}')
        entries = []
        seen_ids: set[int] = set()
        seen_guids: set[str] = set()
        for raw in data.get("schemas", []):
            entry = _entry(raw, str(index))
            if not self._is_schema_file(entry["file"]):
                raise ValueError(
                    f"{index} names {entry['file']!r}, which is not a file in the folder"
                )
            if entry["id"] is not None:
                if entry["id"] in seen_ids:
                    raise ValueError(f"{index}: schema id {entry['id']} appears twice")
                seen_ids.add(entry["id"])
            if entry["guid"]:
                if entry["guid"] in seen_guids:
                    raise ValueError(f"{index}: schema guid {entry['guid']} appears twice")
                seen_guids.add(entry["guid"])
            entries.append(entry)
        return entries

    # -- the SchemaRegistry protocol ---------------------------------------------------------

    def get_schema_by_id(self, schema_id: int) -> RegisteredSchema:
        """The schema whose index entry has this id."""
        entry = self._by_id.get(schema_id)
        if entry is None:
            raise UnknownSchema(
                f"schema id {schema_id} is not in {self.path / INDEX_FILE}",
                schema_id=schema_id,
                registry_error_code=40403,
            )
        return self._load(entry)

    def get_schema_by_guid(self, schema_guid: str) -> RegisteredSchema:
        """The schema whose index entry has this GUID."""
        entry = self._by_guid.get(schema_guid.lower())
        if entry is None:
            raise UnknownSchema(
                f"schema guid {schema_guid} is not in {self.path / INDEX_FILE}",
                schema_guid=schema_guid,
                registry_error_code=40403,
            )
        return self._load(entry)

    def get_version(self, subject: str, version: int) -> RegisteredSchema:
        """The entry with this subject and version, or the file at path `subject` (v1)."""
        entry = self._by_subject.get((subject, int(version)))
        if entry is None and int(version) == 1 and self._is_schema_file(subject):
            entry = {
                "file": subject,
                "id": None,
                "guid": None,
                "subject": subject,
                "version": 1,
                "schema_type": "PROTOBUF",
                "references": None,
            }
        if entry is None:
            known = any(s == subject for s, _ in self._by_subject) or self._is_schema_file(subject)
            raise UnknownSchema(
                f"subject {subject!r} version {version} is not in {self.path}",
                registry_error_code=40402 if known else 40401,
            )
        return self._load(entry)

    def close(self) -> None:
        """Nothing to release."""

    # -- internals -----------------------------------------------------------------------------

    def _is_schema_file(self, name: str) -> bool:
        candidate = (self.path / name).resolve()
        return candidate.is_file() and candidate.is_relative_to(self.path)

    def _load(self, entry: dict[str, Any]) -> RegisteredSchema:
        file = entry["file"]
        try:
            raw = (self.path / file).read_bytes()
        except OSError as exc:  # removed or unreadable since the index was read
            raise RegistryUnavailable(
                f"schema file {file!r} of {self.path} cannot be read: {exc.strerror}"
            ) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SchemaInvalid(
                f"schema file {file!r} is not UTF-8 (byte {exc.start})",
                schema_id=entry["id"],
                schema_guid=entry["guid"],
            ) from None
        if entry["references"] is not None:
            refs = entry["references"]
        elif entry["schema_type"] == "PROTOBUF":
            refs = tuple(self._reference_for(name) for name in self._imports_of(file))
        else:
            refs = ()
        return RegisteredSchema(
            schema=text,
            schema_type=entry["schema_type"],
            references=refs,
            format="text",
            schema_id=entry["id"],
            schema_guid=entry["guid"],
            subject=entry["subject"],
            version=entry["version"],
        )

    def _reference_for(self, name: str) -> SchemaReference:
        entry = self._by_file.get(name)
        if entry is not None:
            return SchemaReference(name, entry["subject"], entry["version"])
        return SchemaReference(name, name, 1)

    def _imports_of(self, file: str) -> tuple[str, ...]:
        """Direct, non-builtin imports of `file`, as protoc reads them."""
        with self._lock:
            found = self._imports.get(file)
            if found is None:
                sources: dict[str, str] = {}
                unreadable: list[str] = []
                for path in sorted(self.path.rglob("*.proto")):
                    name = path.relative_to(self.path).as_posix()
                    try:
                        sources[name] = path.read_bytes().decode("utf-8")
                    except (OSError, UnicodeDecodeError):
                        unreadable.append(name)  # an import of it is then "not found"
                try:
                    compiled = run_protoc(sources, [file])
                except SchemaInvalid as exc:
                    if unreadable:
                        exc.message += f" (not read, not UTF-8: {', '.join(unreadable[:5])})"
                        exc.args = (exc.message,)
                    raise
                fds = descriptor_pb2.FileDescriptorSet.FromString(compiled)
                proto = next(f for f in fds.file if f.name == file)
                found = tuple(d for d in proto.dependency if not is_builtin(d))
                self._imports[file] = found
            return found


def _entry(raw: object, index: str) -> dict[str, Any]:
    """One index entry, checked and normalised (GUIDs lower case with dashes)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("file"), str):
        raise ValueError(f"{index}: every schema needs a 'file' (a path): {raw!r}")
    file = PurePosixPath(raw["file"])  # "./a//b.proto" is "a/b.proto", its import path
    if file.is_absolute() or ".." in file.parts or not file.parts:
        raise ValueError(f"{index}: file {raw['file']!r} must be a path inside the folder")
    schema_id = raw.get("id")
    if schema_id is not None and (type(schema_id) is not int or not 0 <= schema_id < 2**32):
        raise ValueError(f"{index}: schema id {schema_id!r} is not an integer in [0, 2^32)")
    guid = raw.get("guid")
    if guid is not None:
        try:
            guid = str(uuid.UUID(str(guid)))
        except ValueError:
            raise ValueError(f"{index}: schema guid {guid!r} is not a GUID") from None
    version = raw.get("version", 1)
    if type(version) is not int or version < 1:
        raise ValueError(
            f"{index}: version {version!r} of {raw['file']!r} is not a positive integer"
        )
    references = raw.get("references")
    if references is not None:
        if not isinstance(references, list):
            raise ValueError(f"{index}: references of {raw['file']!r} must be a list")
        references = tuple(_reference(r, index) for r in references)
    return {
        "file": file.as_posix(),
        "id": schema_id,
        "guid": guid,
        "subject": str(raw.get("subject") or file.as_posix()),
        "version": version,
        "schema_type": str(raw.get("schema_type", "PROTOBUF")),
        "references": references,
    }


def _reference(raw: object, index: str) -> SchemaReference:
    if (
        not isinstance(raw, dict)
        or not isinstance(raw.get("name"), str)
        or not isinstance(raw.get("subject"), str)
        or type(raw.get("version", 1)) is not int
    ):
        raise ValueError(
            f'{index}: a reference is {{"name": str, "subject": str, "version": int}}: {raw!r}'
        )
    return SchemaReference(raw["name"], raw["subject"], raw.get("version", 1))
