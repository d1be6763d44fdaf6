"""protolake codec: Confluent-framed Protobuf from Kafka records, decoded against a registry.

Pure Python (protobuf, requests, grpcio-tools); imports no pyspark, airflow, great
expectations nor any other protolake package (an import-linter contract keeps it so).
Layers: `framing` -> `registry` (`http_registry` over `http_transport`, `http_auth`,
`http_errors`, `http_answers`; `directory_registry`) -> `descriptors`
-> `payload` -> `decode`. See docs/contracts.md, section "codec".
"""

import logging

from .decode import (
    DecodedRecord,
    Decoder,
    decode_payload,
    decode_payloads,
    has_unknown_fields,
    message_to_json,
)
from .descriptors import ResolvedSchema, SchemaResolver, message_class_for
from .directory_registry import DirectorySchemaRegistry
from .errors import (
    REASON_CODES,
    BadIndexes,
    BadMagic,
    BadPayload,
    CodecError,
    EmptyValue,
    NotProtobuf,
    RegistryUnavailable,
    SchemaCompilerUnavailable,
    SchemaInvalid,
    Truncated,
    UnknownFields,
    UnknownMessage,
    UnknownSchema,
)
from .framing import Frame, SchemaKey, parse_frame, write_frame
from .http_registry import HttpSchemaRegistry
from .registries import open_registry
from .registry import RegisteredSchema, SchemaReference, SchemaRegistry

# A library logs, the application decides where to: no "last resort" stderr output.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "REASON_CODES",
    "BadIndexes",
    "BadMagic",
    "BadPayload",
    "CodecError",
    "DecodedRecord",
    "Decoder",
    "DirectorySchemaRegistry",
    "EmptyValue",
    "Frame",
    "HttpSchemaRegistry",
    "NotProtobuf",
    "RegisteredSchema",
    "RegistryUnavailable",
    "ResolvedSchema",
    "SchemaCompilerUnavailable",
    "SchemaInvalid",
    "SchemaKey",
    "SchemaReference",
    "SchemaRegistry",
    "SchemaResolver",
    "Truncated",
    "UnknownFields",
    "UnknownMessage",
    "UnknownSchema",
    "decode_payload",
    "decode_payloads",
    "has_unknown_fields",
    "message_class_for",
    "message_to_json",
    "open_registry",
    "parse_frame",
    "write_frame",
]
