"""A Confluent-Schema-Registry-compatible REST server for local runs and tests.

Contract: it answers the subset of Confluent's REST API (docs.confluent.io, "Schema Registry
API Reference") that producers and consumers use, the way Confluent answers it, so that
confluent-kafka's ``SchemaRegistryClient``/``ProtobufSerializer``/``ProtobufDeserializer``
and protolake's own ``codec.HttpSchemaRegistry`` work against it unchanged:

    GET  /                                  {}
    GET  /schemas/types                     ["AVRO", "JSON", "PROTOBUF"]
    GET  /schemas/ids/{id}[?format=serialized]      {"schema", "schemaType"?, "references"?, "guid"}
    GET  /schemas/guids/{guid}[?format=serialized]  same
    GET  /schemas/ids/{id}/subjects | /versions     subjects / [{"subject", "version"}]
    GET  /subjects[?deleted=true]           subject names
    POST /subjects/{s}/versions             register -> {"id", "guid"} (identical schema -> same id)
    POST /subjects/{s}                      lookup -> {"subject", "version", "id", "guid", "schema", ...}
    GET  /subjects/{s}/versions             [1, 2, ...]
    GET  /subjects/{s}/versions/{v|latest|-1}[/schema|/referencedby]
    DELETE /subjects/{s}[?permanent=true], DELETE /subjects/{s}/versions/{v}[?permanent=true]
    GET|PUT /config, GET|PUT|DELETE /config/{s}, GET /mode, GET /contexts

Responses have content type ``application/vnd.schemaregistry.v1+json``; errors are
``{"error_code": N, "message": "..."}`` with Confluent's codes: 40101 unauthorized,
40401 subject not found, 40402 version not found, 40403 schema not found, 40404 subject
soft-deleted, 40405 subject not soft-deleted first, 40408 no subject-level config,
42201 invalid schema, 42202 invalid version, 42206 schema still referenced, 50003
(injected) unavailable. Subjects are
URL-decoded and may contain ``/`` (the serializer names reference subjects by file name,
e.g. ``shop/common.proto``). ``schemaType`` is omitted for AVRO, as Confluent does.

Protobuf schemas are accepted as ``.proto`` text or as a base64 ``FileDescriptorProto`` (what
confluent-kafka's Python serializer sends). The default format answers ``.proto`` text (a
base64 registration is rendered to text, as Confluent does); ``?format=serialized`` answers
base64 of a ``FileDescriptorProto`` (text is compiled by protoc, through ``codec.protoc``,
against its references and the well-known imports). Invalid schemas are rejected with 42201.
Not implemented: compatibility checks (the configured level is stored and reported, never
enforced), schema normalization, contexts other than the default, metadata and rule sets
(accepted and ignored).

Options: HTTP basic auth (``users={"user": "password"}``; 401 otherwise; passwords never
logged), fault injection (``fail_next(n, status=503)``, ``delay_next(n, seconds)``),
``ignore_format_serialized`` (answer text even for ``?format=serialized``, like registries
that ignore the parameter), JSON persistence (``data=path``; written atomically after every
change, reloaded on start), and a request log (``handle.requests``) so tests can assert how
often a client called.

Python API::

    handle = start_registry_server(port=0, users={"alice": "s3cret"})
    handle.url; handle.register("shop.orders-value", proto_text, references=[...]) -> id
    handle.fail_next(2); handle.stop()

Command line, from the repository root: ``python -m infra.registry_server --port 8081 --data
run/registry.json``.

Modules, one concern each: `errors` (RegistryError and Confluent's codes), `store` (schemas,
subjects, versions, persistence), `protobuf` (base64 descriptors, compiling text, linking),
`proto_text` (descriptor -> .proto text), `compat` (the compatibility configuration),
`handler` (HTTP routes and answers), `server` (the handle, the thread, the command line).
"""

from .server import RegistryServerHandle, start_registry_server

__all__ = ["RegistryServerHandle", "start_registry_server"]
