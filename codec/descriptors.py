"""From a registered schema to compiled descriptors, and from message indexes to a type.

Resolution (`SchemaResolver.resolve`): fetch the writer schema by id or GUID, follow its
references recursively (depth first, each file once; a cycle is `SchemaInvalid`), and build
one `FileDescriptorSet` holding the schema and everything it imports, in dependency order:

- Each referenced schema is stored under its reference *name*, so `import
  "shop/common.proto";` finds the schema registered under whatever subject the reference says.
- Schemas that came back serialized (base64 `FileDescriptorProto`) are used as they are.
  Schemas that came back as .proto text are compiled by protoc (`codec.protoc`, which runs
  `python -m grpc_tools.protoc` in a subprocess so its diagnostics can be captured); serialized
  imports are handed to it with `--descriptor_set_in`. There is no hand-written .proto parser.
- Well-known types resolve without being registered: `google/protobuf/*.proto` (bundled with
  grpcio-tools), `google/type/*.proto`, `confluent/meta.proto` and
  `confluent/type/decimal.proto` (shipped in `codec/_proto`). A reference with one of those
  names is not fetched: the bundled file is used, so a producer that registered them resolves
  the same way as one that did not.
- The schema file itself is named `protolake/schema-<id or guid>.proto` in the set.

The result is cached (bounded LRU) by schema id or GUID, which never change meaning, so the
registry is asked once per schema; permanent failures (`NotProtobuf`, `SchemaInvalid`) are
cached too so a bad schema is not recompiled per record. A missing reference
(`MissingReference`) is not: it may be registered later.

Message indexes (`ResolvedSchema.message_type_for`): the first index picks a top-level message
of the schema file, each next index a nested message of the previous one. Only messages are
counted, never enums. Nested messages are counted as protoc lists them in
`DescriptorProto.nested_type`, which includes the synthetic `XxxEntry` message protoc creates
for a `map<>` field, at the place the map field is declared. So in
`message M { map<string, int32> m = 1; message N {} }`, `N` is `[0, 1]`, not `[0, 0]`: this is
what confluent-kafka's Python serializer writes (it walks `Descriptor.nested_types`), and it
is tested against it. Indexes that land on a map entry are `UnknownMessage`.

`message_class_for(fds_bytes, full_name)` rebuilds a message class from the bytes alone (for
Spark executors, in a fresh process), cached by those bytes.

Raises: NotProtobuf, SchemaInvalid, UnknownMessage, plus what the registry raises
(UnknownSchema, RegistryUnavailable).
"""

from __future__ import annotations

import base64
import binascii
import logging
import posixpath
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from .errors import (
    CodecError,
    MissingReference,
    NotProtobuf,
    SchemaInvalid,
    UnknownMessage,
    UnknownSchema,
)
from .framing import Frame, SchemaKey
from .protoc import builtin_file_descriptor_set, is_builtin, run_protoc
from .registry import RegisteredSchema, SchemaRegistry

log = logging.getLogger(__name__)

#: Bound on the files one schema may pull in through references.
MAX_REFERENCED_FILES = 500
ROOT_FILE_PREFIX = "protolake/schema-"


def _builtin_protos() -> dict[str, descriptor_pb2.FileDescriptorProto]:
    return {f.name: f for f in builtin_file_descriptor_set().file}


def _check_name(name: str) -> None:
    normal = posixpath.normpath(name)
    if (
        not name
        or name != normal
        or name.startswith(("/", "../"))
        or name == ".."
        or "\\" in name
        or "\x00" in name
    ):
        raise SchemaInvalid(f"reference name {name!r} is not a relative file path")


def collect_references(
    schema: RegisteredSchema, registry: SchemaRegistry
) -> dict[str, RegisteredSchema]:
    """Fetch a schema's references recursively; return name -> schema, imports first.

    Builtin names are skipped (resolved locally). Each name is fetched once; a reference
    cycle, a missing reference or a non-Protobuf reference is `SchemaInvalid`.
    """
    done: dict[str, RegisteredSchema] = {}
    visiting: list[str] = []

    def visit(current: RegisteredSchema) -> None:
        for ref in current.references:
            if is_builtin(ref.name) or ref.name in done:
                continue
            if ref.name in visiting:
                chain = " -> ".join([*visiting, ref.name])
                raise SchemaInvalid(f"schema references form a cycle: {chain}")
            _check_name(ref.name)
            if len(done) + len(visiting) >= MAX_REFERENCED_FILES:
                raise SchemaInvalid(f"schema pulls in more than {MAX_REFERENCED_FILES} files")
            try:
                dep = registry.get_version(ref.subject, ref.version)
            except UnknownSchema as exc:
                raise MissingReference(
                    f"reference {ref.name!r} (subject {ref.subject!r} version {ref.version}) "
                    f"is not in the registry: {exc.message}",
                    registry_error_code=exc.registry_error_code,
                    http_status=exc.http_status,
                ) from None
            if dep.schema_type != "PROTOBUF":
                raise SchemaInvalid(
                    f"reference {ref.name!r} is a {dep.schema_type} schema, not PROTOBUF"
                )
            visiting.append(ref.name)
            visit(dep)
            visiting.pop()
            done[ref.name] = dep

    visit(schema)
    return done


def _decode_serialized(name: str, schema: RegisteredSchema) -> descriptor_pb2.FileDescriptorProto:
    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode(schema.schema, validate=True)
        )
    except (binascii.Error, ValueError, DecodeError):
        raise SchemaInvalid(f"{name}: serialized schema is not a FileDescriptorProto") from None
    proto.name = name
    return proto


def _ordered(
    files: dict[str, descriptor_pb2.FileDescriptorProto],
    compiled_elsewhere: Iterable[str] = (),
) -> list[descriptor_pb2.FileDescriptorProto]:
    """Order files so every file comes after its imports; fail on missing imports.

    Imports named in `compiled_elsewhere` (.proto texts that protoc compiles alongside) are
    taken as present and left out of the result.
    """
    ordered: list[descriptor_pb2.FileDescriptorProto] = []
    placed: set[str] = set(compiled_elsewhere)
    builtins: dict[str, descriptor_pb2.FileDescriptorProto] | None = None

    def place(name: str, needed_by: str, depth: int) -> None:
        nonlocal builtins
        if name in placed:
            return
        if depth > MAX_REFERENCED_FILES:
            raise SchemaInvalid(f"imports of {needed_by} nest too deep or form a cycle")
        proto = files.get(name)
        if proto is None and is_builtin(name):
            builtins = builtins if builtins is not None else _builtin_protos()
            proto = builtins.get(name)
        if proto is None:
            raise SchemaInvalid(f"{needed_by} imports {name!r}, which no reference provides")
        for dep in proto.dependency:
            place(dep, name, depth + 1)
        placed.add(name)
        ordered.append(proto)

    for name in files:
        place(name, name, 0)
    return ordered


def build_file_descriptor_set(
    schema: RegisteredSchema, registry: SchemaRegistry, root_name: str
) -> bytes:
    """Build the FileDescriptorSet of `schema` (named `root_name`) and all its imports.

    Raises:
        NotProtobuf: the schema is not a Protobuf schema.
        SchemaInvalid: it or its references do not compile.
    """
    if schema.schema_type != "PROTOBUF":
        raise NotProtobuf(f"writer schema is {schema.schema_type}, not PROTOBUF")
    references = collect_references(schema, registry)
    everything = {**references, root_name: schema}
    serialized = {n: s for n, s in everything.items() if s.format == "serialized"}
    texts = {n: s.schema for n, s in everything.items() if s.format != "serialized"}
    protos = {n: _decode_serialized(n, s) for n, s in serialized.items()}
    if texts:
        set_in = None
        if protos:
            # Serialized files may import text ones: protoc finds those among the sources.
            ordered = _ordered(protos, compiled_elsewhere=texts)
            set_in = descriptor_pb2.FileDescriptorSet(file=ordered).SerializeToString()
        raw = run_protoc(texts, [root_name], descriptor_set_in=set_in)
        # The source info stays: it carries the .proto comments, which silver turns into
        # table and column comments of the catalog (decoding does not need it).
        fds = descriptor_pb2.FileDescriptorSet.FromString(raw)
    else:
        fds = descriptor_pb2.FileDescriptorSet(file=_ordered(protos))
    result = fds.SerializeToString(deterministic=True)
    _pool_for(result)  # validates: unresolved type names and the like fail here, once
    return result


# -- resolved schemas ---------------------------------------------------------------------


_MAP_ENTRY = "<map entry>"


def _index_messages(root: descriptor_pb2.FileDescriptorProto) -> dict[tuple[int, ...], str]:
    """Every message path of a file -> full name (map entries marked, never returned)."""
    table: dict[tuple[int, ...], str] = {}
    prefix = f"{root.package}." if root.package else ""
    stack: list[tuple[tuple[int, ...], str, descriptor_pb2.DescriptorProto]] = [
        ((i,), prefix + m.name, m) for i, m in enumerate(root.message_type)
    ]
    while stack:
        path, name, message = stack.pop()
        table[path] = _MAP_ENTRY if message.options.map_entry else name
        for i, nested in enumerate(message.nested_type):
            stack.append(((*path, i), f"{name}.{nested.name}", nested))
    return table


@dataclass(frozen=True)
class ResolvedSchema:
    """A writer schema, compiled: its descriptors and how its message indexes resolve.

    Attributes:
        schema_id, schema_guid: the schema's identity (the one the frame used, at least).
        file_descriptor_set: serialized FileDescriptorSet with the schema and all imports.
        root_file: the schema's own file name in the set.
    """

    schema_id: int | None
    schema_guid: str | None
    file_descriptor_set: bytes = field(repr=False)
    root_file: str
    _messages: dict[tuple[int, ...], str] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_file_descriptor_set(
        cls,
        file_descriptor_set: bytes,
        root_file: str,
        *,
        schema_id: int | None = None,
        schema_guid: str | None = None,
    ) -> ResolvedSchema:
        """Build from compiled bytes (e.g. ones a driver shipped to an executor)."""
        fds = descriptor_pb2.FileDescriptorSet.FromString(file_descriptor_set)
        roots = [f for f in fds.file if f.name == root_file]
        if not roots:
            raise SchemaInvalid(f"descriptor set has no file {root_file!r}")
        return cls(
            schema_id, schema_guid, file_descriptor_set, root_file, _index_messages(roots[0])
        )

    @property
    def message_types(self) -> tuple[str, ...]:
        """Full names of the schema file's messages (map entries excluded), index order."""
        return tuple(n for _, n in sorted(self._messages.items()) if n != _MAP_ENTRY)

    def indexes_of(self, full_name: str) -> tuple[int, ...]:
        """The message indexes a producer writes for `full_name` (inverse of message_type_for)."""
        for path, name in self._messages.items():
            if name == full_name:
                return path
        raise UnknownMessage(f"schema has no message {full_name!r}", message_type=full_name)

    def message_type_for(self, indexes: tuple[int, ...] | list[int]) -> str:
        """Full name of the message the indexes name.

        Raises:
            UnknownMessage: the indexes name no message (or a synthetic map entry).
        """
        key = indexes if isinstance(indexes, tuple) else tuple(indexes)
        name = self._messages.get(key)
        if name is None or name == _MAP_ENTRY:
            what = "a map entry, not a message" if name else "no message"
            raise UnknownMessage(
                f"message indexes {list(key)} name {what} in schema "
                f"{self.schema_id if self.schema_id is not None else self.schema_guid}",
                schema_id=self.schema_id,
                schema_guid=self.schema_guid,
                message_indexes=key,
            )
        return name

    def message_class_for(self, indexes: tuple[int, ...] | list[int]) -> type[Message]:
        """The generated message class for the indexes."""
        return message_class_for(self.file_descriptor_set, self.message_type_for(indexes))


class SchemaResolver:
    """Resolve frames to compiled schemas, asking the registry once per schema.

    Args:
        registry: where schemas come from.
        cache_size: how many schemas (and permanent schema failures) to keep.
    """

    def __init__(self, registry: SchemaRegistry, *, cache_size: int = 256) -> None:
        self.registry = registry
        self._cache_size = cache_size
        self._cache: OrderedDict[int | str, ResolvedSchema | CodecError] = OrderedDict()
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"SchemaResolver(registry={self.registry!r})"

    def resolve(self, frame: Frame) -> ResolvedSchema:
        """The compiled writer schema of a frame."""
        if frame.schema_id is not None:
            return self.resolve_id(frame.schema_id)
        assert frame.schema_guid is not None
        return self.resolve_guid(frame.schema_guid)

    def resolve_key(self, key: SchemaKey) -> tuple[ResolvedSchema, str]:
        """The compiled writer schema a schema key names, and its message type's full name.

        Raises:
            UnknownMessage: the key's message indexes name no message of the schema.
        """
        if key.schema_id is not None:
            schema = self.resolve_id(key.schema_id)
        else:
            assert key.schema_guid is not None
            schema = self.resolve_guid(key.schema_guid)
        return schema, schema.message_type_for(key.message_indexes)

    def resolve_id(self, schema_id: int) -> ResolvedSchema:
        """The compiled schema with this id."""
        return self._resolve(schema_id, None)

    def resolve_guid(self, schema_guid: str) -> ResolvedSchema:
        """The compiled schema with this GUID."""
        return self._resolve(None, schema_guid.lower())

    def _resolve(self, schema_id: int | None, schema_guid: str | None) -> ResolvedSchema:
        key: int | str = schema_id if schema_id is not None else str(schema_guid)
        cached = self._cache.get(key)
        if cached is None:
            with self._lock:  # one compile per schema, even with several threads asking
                cached = self._cache.get(key)
                if cached is None:
                    cached = self._load(schema_id, schema_guid)
                    self._cache[key] = cached
                    while len(self._cache) > self._cache_size:
                        self._cache.popitem(last=False)
        if isinstance(cached, CodecError):
            raise cached.copy()
        return cached

    def _load(self, schema_id: int | None, schema_guid: str | None) -> ResolvedSchema | CodecError:
        try:
            if schema_id is not None:
                registered = self.registry.get_schema_by_id(schema_id)
                root = f"{ROOT_FILE_PREFIX}{schema_id}.proto"
            else:
                registered = self.registry.get_schema_by_guid(str(schema_guid))
                root = f"{ROOT_FILE_PREFIX}{schema_guid}.proto"
            fds = build_file_descriptor_set(registered, self.registry, root)
        except (NotProtobuf, SchemaInvalid) as exc:
            exc.schema_id, exc.schema_guid = schema_id, schema_guid
            if isinstance(exc, MissingReference):  # asked again: the registry client
                raise  # remembers its 404 for a while (negative_ttl)
            # said when remembered (once per resolver and cache entry): every record of the
            # schema fails with it from now on
            key = schema_id if schema_id is not None else schema_guid
            log.warning("schema %s is %s for good (%s): %s", key, exc.code, exc.stage, exc.message)
            return exc.copy()  # permanent for this id: remember it (not its traceback)
        return ResolvedSchema.from_file_descriptor_set(
            fds, root, schema_id=schema_id, schema_guid=schema_guid
        )


# -- message classes from bytes -----------------------------------------------------------

_POOL_CACHE_SIZE = 64
_CLASS_CACHE_SIZE = 4096
_pools: OrderedDict[bytes, descriptor_pool.DescriptorPool] = OrderedDict()
_classes: dict[tuple[bytes, str], type[Message]] = {}
_cache_lock = threading.Lock()


def _pool_for(file_descriptor_set: bytes) -> descriptor_pool.DescriptorPool:
    # Keyed by the bytes themselves: Python caches a bytes object's hash, so a hit on the
    # same object costs a dict lookup and an equal copy one memcmp.
    pool = _pools.get(file_descriptor_set)
    if pool is not None:
        return pool
    try:
        fds = descriptor_pb2.FileDescriptorSet.FromString(file_descriptor_set)
    except DecodeError:
        raise SchemaInvalid("bytes are not a serialized FileDescriptorSet") from None
    pool = descriptor_pool.DescriptorPool()
    files = {f.name: f for f in fds.file}
    try:
        for proto in _ordered(files):
            pool.Add(proto)
    except SchemaInvalid:
        raise
    except Exception as exc:  # upb reports bad descriptors as TypeError or others
        raise SchemaInvalid(f"descriptors do not build: {exc}") from None
    with _cache_lock:
        _pools[file_descriptor_set] = pool
        while len(_pools) > _POOL_CACHE_SIZE:
            _pools.popitem(last=False)
    return pool


def message_class_for(file_descriptor_set: bytes, full_name: str) -> type[Message]:
    """The message class for `full_name` built from a serialized FileDescriptorSet.

    Works in a fresh process from the bytes alone; cached by the bytes and name.

    Raises:
        SchemaInvalid: the bytes are not a valid descriptor set.
        UnknownMessage: the set has no message of that name.
    """
    key = (file_descriptor_set, full_name)
    cls = _classes.get(key)
    if cls is not None:
        return cls
    pool = _pool_for(file_descriptor_set)
    try:
        descriptor = pool.FindMessageTypeByName(full_name)
    except KeyError:
        raise UnknownMessage(
            f"descriptor set has no message {full_name!r}", message_type=full_name
        ) from None
    cls = message_factory.GetMessageClass(descriptor)
    with _cache_lock:
        if len(_classes) >= _CLASS_CACHE_SIZE:
            _classes.clear()  # rare: thousands of schema/type pairs in one process
        _classes[key] = cls
    return cls
