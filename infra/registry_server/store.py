"""Schemas, subjects and versions: the registry's state, thread-safe, optionally persisted.

Ids are global and a schema registered twice (same type, text and references) keeps its id;
versions count per subject from 1; a soft-deleted version is kept (``?deleted=true`` shows
it) until deleted permanently, and a version a live schema references cannot be deleted
(42206). References are pinned to concrete versions when registered ("latest"/-1 resolves
then), as Confluent does.

Persistence (``data_path``): one JSON file, written atomically after every change and
reloaded on start, so a restarted registry answers the same ids.

Raises `RegistryError` with Confluent's codes (see `errors`), 42202 for a bad version.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .compat import DEFAULT_LEVEL, CompatibilityConfig
from .errors import (
    RegistryError,
    invalid_schema,
    schema_not_found,
    subject_not_found,
    version_not_found,
)
from .protobuf import descriptor_of, prepare_protobuf

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


@dataclass
class StoredSchema:
    """One schema (an id): what was registered, plus derived forms computed once."""

    id: int
    guid: str
    schema_type: str
    schema: str  # as registered
    references: list[dict[str, Any]]
    text: str | None = None  # .proto text (PROTOBUF) for the default format
    serialized: str | None = None  # base64 FileDescriptorProto (PROTOBUF)

    def key(self) -> tuple[str, str, str]:
        return (self.schema_type, self.schema, json.dumps(self.references, sort_keys=True))


@dataclass
class SubjectVersion:
    subject: str
    version: int
    schema_id: int
    deleted: bool = False


def parse_request(body: Any) -> tuple[str, str, list[dict[str, Any]]]:
    """A register/lookup body -> (schema type, schema, references with their keys only)."""
    if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
        raise invalid_schema("the request needs a 'schema' string")
    schema_type = str(body.get("schemaType") or "AVRO").upper()
    if schema_type not in SCHEMA_TYPES:
        raise RegistryError(422, 42201, f"Invalid schema type {schema_type}")
    references = []
    for ref in body.get("references") or []:
        if not isinstance(ref, dict) or not all(k in ref for k in ("name", "subject")):
            raise invalid_schema(f"bad reference {ref!r}")
        references.append(
            {
                "name": str(ref["name"]),
                "subject": str(ref["subject"]),
                "version": int(ref.get("version", -1)),
            }
        )
    return schema_type, body["schema"], references


def _bad_version(version: str) -> RegistryError:
    return RegistryError(
        422,
        42202,
        "The specified version '"
        + version
        + "' is not a valid version id. Allowed values are between "
        '[1, 2^31-1] and the string "latest"',
    )


class SchemaStore:
    """Subjects, versions and schemas; thread-safe; optionally persisted to a JSON file."""

    def __init__(self, data_path: str | None = None, *, first_id: int = 1) -> None:
        self._lock = threading.RLock()
        self._data_path = data_path
        self.schemas: dict[int, StoredSchema] = {}
        self.by_guid: dict[str, int] = {}
        self.subjects: dict[str, list[SubjectVersion]] = {}
        self.compatibility = CompatibilityConfig()
        self.next_id = first_id
        if data_path and os.path.exists(data_path):
            self._load(data_path)

    # -- persistence
    def _load(self, path: str) -> None:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        for item in data.get("schemas", []):
            s = StoredSchema(**item)
            self.schemas[s.id] = s
            self.by_guid[s.guid] = s.id
        for subject, versions in data.get("subjects", {}).items():
            self.subjects[subject] = [SubjectVersion(**v) for v in versions]
        self.compatibility = CompatibilityConfig(
            data.get("compatibility", DEFAULT_LEVEL), dict(data.get("subject_compatibility", {}))
        )
        self.next_id = max(data.get("next_id", 1), max(self.schemas, default=0) + 1)

    def _save(self) -> None:
        if not self._data_path:
            return
        data = {
            "schemas": [vars(s) for s in self.schemas.values()],
            "subjects": {k: [vars(v) for v in vs] for k, vs in self.subjects.items()},
            "compatibility": self.compatibility.global_level,
            "subject_compatibility": self.compatibility.subject_levels,
            "next_id": self.next_id,
        }
        folder = os.path.dirname(os.path.abspath(self._data_path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".registry-", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, self._data_path)  # atomic: a crash never leaves half a file

    # -- lookups
    def live_versions(self, subject: str, *, deleted: bool = False) -> list[SubjectVersion]:
        with self._lock:
            versions = self.subjects.get(subject)
            if not versions or (not deleted and all(v.deleted for v in versions)):
                raise subject_not_found(subject)
            return [v for v in versions if deleted or not v.deleted]

    def get_version(self, subject: str, version: str, *, deleted: bool = False) -> SubjectVersion:
        with self._lock:
            versions = self.live_versions(subject, deleted=deleted)
            if version in ("latest", "-1"):
                return versions[-1]
            try:
                number = int(version)
            except ValueError:
                raise _bad_version(version) from None
            if number <= 0:
                raise RegistryError(422, 42202, f"The specified version '{version}' is not valid")
            for v in versions:
                if v.version == number:
                    return v
            raise version_not_found(number)

    def get_schema(self, schema_id: int) -> StoredSchema:
        with self._lock:
            schema = self.schemas.get(schema_id)
        if schema is None:
            raise schema_not_found()
        return schema

    def get_schema_by_guid(self, guid: str) -> StoredSchema:
        with self._lock:
            schema_id = self.by_guid.get(guid.lower())
        if schema_id is None:
            raise schema_not_found()
        return self.get_schema(schema_id)

    def subject_names(self, prefix: str = "", *, deleted: bool = False) -> list[str]:
        """Subjects starting with `prefix` that have a live version (any, with `deleted`)."""
        with self._lock:
            return sorted(
                s
                for s, vs in self.subjects.items()
                if s.startswith(prefix) and (deleted or any(not v.deleted for v in vs))
            )

    def versions_of_schema(self, schema_id: int, *, deleted: bool = False) -> list[tuple[str, int]]:
        """(subject, version) of every version holding the schema `schema_id`."""
        with self._lock:
            return [
                (s, v.version)
                for s, vs in self.subjects.items()
                for v in vs
                if v.schema_id == schema_id and (deleted or not v.deleted)
            ]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the schemas that reference `subject` at `version`."""
        with self._lock:
            return sorted(
                s.id
                for s in self.schemas.values()
                if any(r["subject"] == subject and r["version"] == version for r in s.references)
            )

    # -- registration
    def register(self, subject: str, body: Any) -> StoredSchema:
        """POST /subjects/{subject}/versions: a new version, or the existing one if identical."""
        schema_type, schema, references = parse_request(body)
        with self._lock:
            for ref in references:
                ref["version"] = self._pinned_version(ref)
            key = (schema_type, schema, json.dumps(references, sort_keys=True))
            existing = next((s for s in self.schemas.values() if s.key() == key), None)
            if existing is None:
                existing = self._add_schema(schema_type, schema, references)
            versions = self.subjects.setdefault(subject, [])
            if not any(v.schema_id == existing.id and not v.deleted for v in versions):
                number = max((v.version for v in versions), default=0) + 1
                versions.append(SubjectVersion(subject, number, existing.id))
            self._save()
            return existing

    def _add_schema(
        self, schema_type: str, schema: str, references: list[dict[str, Any]]
    ) -> StoredSchema:
        text, serialized = self._prepare(schema_type, schema, references)
        stored = StoredSchema(
            id=self.next_id,
            guid=str(uuid.uuid4()),
            schema_type=schema_type,
            schema=schema,
            references=references,
            text=text,
            serialized=serialized,
        )
        self.next_id += 1
        self.schemas[stored.id] = stored
        self.by_guid[stored.guid] = stored.id
        return stored

    def _prepare(
        self, schema_type: str, schema: str, references: list[dict[str, Any]]
    ) -> tuple[str | None, str | None]:
        """Validate a schema; return its (text, serialized) forms (PROTOBUF) or (None, None)."""
        if schema_type == "PROTOBUF":
            return prepare_protobuf(schema, self._dependency_protos(references, set()))
        try:
            json.loads(schema)
        except ValueError as exc:
            raise invalid_schema(f"not JSON: {exc}") from None
        for ref in references:
            self._resolve_reference(ref)
        return None, None

    def _resolve_reference(self, ref: dict[str, Any]) -> StoredSchema:
        try:
            sv = self.get_version(ref["subject"], str(ref["version"]))
        except RegistryError:
            raise invalid_schema(
                f"reference {ref['name']!r} to subject {ref['subject']!r} version "
                f"{ref['version']} not found"
            ) from None
        return self.schemas[sv.schema_id]

    def _dependency_protos(self, references: list[dict[str, Any]], seen: set[str]) -> list[Any]:
        """FileDescriptorProtos of the references (recursively), each named by its ref name."""
        out = []
        for ref in references:
            if ref["name"] in seen:
                continue
            seen.add(ref["name"])
            stored = self._resolve_reference(ref)
            out += self._dependency_protos(stored.references, seen)
            if stored.serialized is None:
                raise invalid_schema(f"schema {stored.id} has no descriptor")
            out.append(descriptor_of(stored.serialized, ref["name"]))
        return out

    def _pinned_version(self, ref: dict[str, Any]) -> int:
        """The concrete version a reference names ("latest"/-1: the latest one now)."""
        version = int(ref["version"])
        if version > 0:
            return version
        try:
            return self.get_version(ref["subject"], "latest").version
        except RegistryError:
            raise invalid_schema(f"reference subject {ref['subject']!r} not found") from None

    def lookup(self, subject: str, body: Any, *, deleted: bool = False) -> SubjectVersion:
        """POST /subjects/{subject}: the version of this subject holding exactly this schema."""
        schema_type, schema, references = parse_request(body)
        with self._lock:
            versions = self.live_versions(subject, deleted=deleted)
            for ref in references:
                ref["version"] = self._pinned_version(ref)
            key = (schema_type, schema, json.dumps(references, sort_keys=True))
            for v in reversed(versions):
                if self.schemas[v.schema_id].key() == key:
                    return v
        raise schema_not_found()

    # -- deletion
    def _check_not_referenced(self, subject: str, versions: Iterable[int]) -> None:
        """Confluent refuses to delete a version that a live schema version references."""
        wanted = set(versions)
        for other, svs in self.subjects.items():
            for sv in svs:
                if sv.deleted:
                    continue
                for ref in self.schemas[sv.schema_id].references:
                    if ref["subject"] == subject and int(ref["version"]) in wanted:
                        raise RegistryError(
                            422,
                            42206,
                            f"One or more references exist to the schema "
                            f"{{subject={subject},version={ref['version']}}} "
                            f"(referenced by {other} version {sv.version})",
                        )

    def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        with self._lock:
            versions = self.subjects.get(subject)
            if not versions:
                raise subject_not_found(subject)
            if permanent:
                if any(not v.deleted for v in versions):
                    raise RegistryError(
                        404,
                        40405,
                        f"Subject '{subject}' was not deleted first before being permanently deleted",
                    )
                del self.subjects[subject]
                self.compatibility.subject_levels.pop(subject, None)
                numbers = [v.version for v in versions]
            else:
                live = [v for v in versions if not v.deleted]
                if not live:
                    raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.")
                self._check_not_referenced(subject, [v.version for v in live])
                for v in live:
                    v.deleted = True
                numbers = [v.version for v in live]
            self._save()
            return numbers

    def delete_version(self, subject: str, version: str, *, permanent: bool) -> int:
        with self._lock:
            sv = self.get_version(subject, version, deleted=permanent)
            if permanent:
                if not sv.deleted:
                    raise RegistryError(
                        404,
                        40407,
                        f"Subject '{subject}' Version {sv.version} was not deleted first before "
                        "being permanently deleted",
                    )
                self.subjects[subject].remove(sv)
                if not self.subjects[subject]:
                    del self.subjects[subject]
            else:
                self._check_not_referenced(subject, [sv.version])
                sv.deleted = True
            self._save()
            return sv.version

    # -- compatibility configuration (stored, never enforced)
    def compatibility_of(self, subject: str | None, *, default_to_global: bool = False) -> str:
        with self._lock:
            if subject is None:
                return self.compatibility.global_level
            return self.compatibility.level_of(subject, default_to_global=default_to_global)

    def set_compatibility(self, subject: str | None, body: Any) -> str:
        with self._lock:
            level = self.compatibility.set_level(subject, body)
            self._save()
        return level

    def delete_compatibility(self, subject: str) -> str:
        with self._lock:
            level = self.compatibility.delete_level(subject)
            self._save()
        return level
