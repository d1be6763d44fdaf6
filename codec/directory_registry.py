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

Per entry: `file` is required; `id` (int) and `guid` are optional but must be unique;
`subject` defaults to the file path, `version` to 1, `schema_type` to "PROTOBUF".
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
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2

from .descriptors import is_builtin, run_protoc
from .errors import UnknownSchema
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
        index = self.path / INDEX_FILE
        if not index.exists():
            return []
        data = json.loads(index.read_text(encoding="utf-8"))
        entries = []
        seen_ids: set[int] = set()
        seen_guids: set[str] = set()
        for raw in data.get("schemas", []):
            if "file" not in raw:
                raise ValueError(f"{index}: every schema needs a 'file': {raw!r}")
            entry = {
                "file": str(raw["file"]),
                "id": raw.get("id"),
                "guid": str(raw["guid"]).lower() if raw.get("guid") else None,
                "subject": str(raw.get("subject") or raw["file"]),
                "version": int(raw.get("version", 1)),
                "schema_type": str(raw.get("schema_type", "PROTOBUF")),
                "references": raw.get("references"),
            }
            if entry["id"] is not None:
                if entry["id"] in seen_ids:
                    raise ValueError(f"{index}: schema id {entry['id']} appears twice")
                seen_ids.add(int(entry["id"]))
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
        if not self._is_schema_file(file):
            raise ValueError(f"{self.path / INDEX_FILE} names {file!r}, which is not in the folder")
        text = (self.path / file).read_text(encoding="utf-8")
        if entry["references"] is not None:
            refs = tuple(
                SchemaReference(str(r["name"]), str(r["subject"]), int(r.get("version", 1)))
                for r in entry["references"]
            )
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
                sources = {
                    p.relative_to(self.path).as_posix(): p.read_text(encoding="utf-8")
                    for p in self.path.rglob("*.proto")
                }
                fds = descriptor_pb2.FileDescriptorSet.FromString(run_protoc(sources, [file]))
                proto = next(f for f in fds.file if f.name == file)
                found = tuple(d for d in proto.dependency if not is_builtin(d))
                self._imports[file] = found
            return found
