"""Errors of the codec: one root, one leaf per failure, each with a stable reason code.

Every failure the codec can report is a `CodecError` leaf. `code` is a stable string from a
closed list (it becomes the quarantine `reason_code`), `stage` says which layer failed
("framing", "registry", "schema" or "payload"), and `record_fault` says whether the record
itself is to blame. Only `RegistryUnavailable` (and its kind `SchemaCompilerUnavailable`) has
`record_fault = False`: the registry could not be reached or refused us, or the schema
compiler could not run, so callers must retry or fail the batch, never quarantine.

Leaves carry what is known where they are raised (byte offset, schema id or GUID, message
indexes, message type, HTTP status, registry error code); `Decoder` fills in the frame's
identifiers on the way out so a quarantine row can record them.

Messages never contain credentials: the HTTP client strips them before building a message.
"""

# Leaf names mirror the reason codes (UnknownSchema <-> UNKNOWN_SCHEMA), and the contract
# fixes RegistryUnavailable, so the "Error" suffix rule does not apply here.
# ruff: noqa: N818

from __future__ import annotations

from typing import ClassVar, Self

#: The closed list of record reason codes, in the order the layers run.
REASON_CODES: tuple[str, ...] = (
    "EMPTY_VALUE",
    "BAD_MAGIC",
    "TRUNCATED",
    "BAD_INDEXES",
    "UNKNOWN_MESSAGE",
    "UNKNOWN_SCHEMA",
    "NOT_PROTOBUF",
    "SCHEMA_INVALID",
    "BAD_PAYLOAD",
    "UNKNOWN_FIELDS",
)


class CodecError(Exception):
    """Root of every error the codec raises on purpose.

    Attributes:
        code: stable reason code (see `REASON_CODES`, plus "REGISTRY_UNAVAILABLE").
        stage: "framing", "registry", "schema" or "payload".
        record_fault: False only when the record is not to blame (registry trouble).
        offset: byte offset in the value (or header) where framing failed, if known.
        schema_id, schema_guid: the writer schema named by the frame, if known.
        message_indexes: the frame's message indexes, if known.
        message_type: full name of the resolved message type, if known.
        http_status, registry_error_code: the registry's answer, if one caused this.
    """

    code: ClassVar[str] = "CODEC_ERROR"
    stage: ClassVar[str] = "framing"
    record_fault: ClassVar[bool] = True

    def __init__(
        self,
        message: str,
        *,
        offset: int | None = None,
        schema_id: int | None = None,
        schema_guid: str | None = None,
        message_indexes: tuple[int, ...] | None = None,
        message_type: str | None = None,
        http_status: int | None = None,
        registry_error_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.schema_id = schema_id
        self.schema_guid = schema_guid
        self.message_indexes = message_indexes
        self.message_type = message_type
        self.http_status = http_status
        self.registry_error_code = registry_error_code

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"

    def copy(self) -> Self:
        """A new error of the same class, text and context, without a traceback.

        A remembered error (a cached 404, a schema that does not compile) is raised as a
        copy: raising one instance again and again would grow its traceback without bound,
        and every record would share (and overwrite) the same context fields.
        """
        twin = type(self).__new__(type(self))
        Exception.__init__(twin, *self.args)
        twin.__dict__.update(self.__dict__)
        return twin


# -- framing -------------------------------------------------------------------------------


class EmptyValue(CodecError):
    """The record value is null or zero bytes long (a tombstone is not a message)."""

    code = "EMPTY_VALUE"
    stage = "framing"


class BadMagic(CodecError):
    """The first byte is neither 0 (schema id) nor 1 (schema GUID)."""

    code = "BAD_MAGIC"
    stage = "framing"


class Truncated(CodecError):
    """The input ends inside the framing (magic, id/GUID or message indexes)."""

    code = "TRUNCATED"
    stage = "framing"


class BadIndexes(CodecError):
    """Message indexes are malformed: negative or absurd count, negative index, or a
    varint longer than its bound."""

    code = "BAD_INDEXES"
    stage = "framing"


# -- registry ------------------------------------------------------------------------------


class UnknownSchema(CodecError):
    """The registry answered 404 for the schema id or GUID (error codes 40401/40402/40403)."""

    code = "UNKNOWN_SCHEMA"
    stage = "registry"


class RegistryUnavailable(CodecError):
    """The registry could not be reached, kept failing, or refused our credentials.

    Not the record's fault: retry later or fail the batch; never quarantine for this.
    """

    code = "REGISTRY_UNAVAILABLE"
    stage = "registry"
    record_fault = False
    #: What the command line says on stderr before the message.
    summary: ClassVar[str] = "registry unavailable"


class SchemaCompilerUnavailable(RegistryUnavailable):
    """The schema compiler (grpcio-tools' protoc) could not run or failed without judging
    the schema: not installed, killed, out of time on a loaded machine, a Python exception,
    a file it could not write (`codec.protoc`).

    No answer about the schema, so not the record's fault: like a registry outage, the batch
    fails and is retried, and nothing is remembered (a schema that protoc rejects is
    `SchemaInvalid`).
    """

    stage = "schema"
    summary = "schema compiler unavailable"


# -- schema --------------------------------------------------------------------------------


class NotProtobuf(CodecError):
    """The writer schema is not Protobuf (no `schemaType` means AVRO)."""

    code = "NOT_PROTOBUF"
    stage = "schema"


class SchemaInvalid(CodecError):
    """The schema text, a serialized descriptor or its references do not compile."""

    code = "SCHEMA_INVALID"
    stage = "schema"


class MissingReference(SchemaInvalid):
    """A schema's reference is not in the registry (not yet, or no longer): the schema may
    resolve later, so it is asked again rather than remembered as invalid."""


class UnknownMessage(CodecError):
    """Well-formed message indexes name no message type of the writer schema."""

    code = "UNKNOWN_MESSAGE"
    stage = "schema"


# -- payload -------------------------------------------------------------------------------


class BadPayload(CodecError):
    """protobuf rejects the payload bytes (including invalid UTF-8 in a proto3 string)."""

    code = "BAD_PAYLOAD"
    stage = "payload"


class UnknownFields(CodecError):
    """The payload carries fields its writer schema does not define."""

    code = "UNKNOWN_FIELDS"
    stage = "payload"


#: Every leaf class, for tests and for callers mapping codes back to classes.
ERROR_CLASSES: tuple[type[CodecError], ...] = (
    EmptyValue,
    BadMagic,
    Truncated,
    BadIndexes,
    UnknownMessage,
    UnknownSchema,
    NotProtobuf,
    SchemaInvalid,
    BadPayload,
    UnknownFields,
    RegistryUnavailable,
)
