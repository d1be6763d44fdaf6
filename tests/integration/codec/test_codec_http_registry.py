"""HttpSchemaRegistry against real HTTP servers: the project's Confluent-compatible registry
test server, a bearer-token server and a TLS server that requires a client certificate."""

from __future__ import annotations

import base64
import json
import logging
import subprocess
import sys
import textwrap

import pytest

from codec import (
    Decoder,
    HttpSchemaRegistry,
    NotProtobuf,
    RegistryUnavailable,
    UnknownSchema,
    write_frame,
)
from tests.support.codec_test_support import compile_protos, confluent_frame, import_generated

pytestmark = pytest.mark.integration

COMMON = 'syntax = "proto3";\npackage httpt.shop;\nmessage Money { string currency = 1; int64 units = 2; }\n'
ORDER = textwrap.dedent(
    """\
    syntax = "proto3";
    package httpt.shop;
    import "shop/common.proto";
    import "google/protobuf/timestamp.proto";
    message Order { string id = 1; Money total = 2; google.protobuf.Timestamp at = 3; }
    """
)


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client(url, **kw):
    kw.setdefault("sleep", Sleeps())
    return HttpSchemaRegistry(url, **kw)


def register_shop(handle) -> int:
    handle.register("shop/common.proto", COMMON)
    return handle.register(
        "orders-value", ORDER, references=[("shop/common.proto", "shop/common.proto", 1)]
    )


def order_payload(decoder, schema_id):
    cls = decoder.resolver.resolve_id(schema_id).message_class_for((0,))
    msg = cls(id="o-1")
    msg.total.units = 12
    return msg.SerializeToString()


def test_404_is_unknown_schema_with_confluent_error_code(registry):
    reg = client(registry.url, negative_ttl=60)
    for _ in range(3):
        with pytest.raises(UnknownSchema) as info:
            reg.get_schema_by_id(4242)
    err = info.value
    assert (err.http_status, err.registry_error_code, err.schema_id) == (404, 40403, 4242)
    assert err.record_fault is True
    assert registry.requests.count(("GET", "/schemas/ids/4242")) == 1  # remembered for a while
    # ... and raised as a fresh copy each time: one instance raised again and again would grow
    # its traceback without bound and share its context fields between records
    errors = []
    for _ in range(50):
        with pytest.raises(UnknownSchema) as info:
            reg.get_schema_by_id(4242)
        errors.append(info.value)
    assert len({id(e) for e in errors}) == 50
    assert {str(e) for e in errors} == {str(err)}
    assert _traceback_depth(errors[-1]) == _traceback_depth(errors[1])
    with pytest.raises(UnknownSchema) as info:
        reg.get_version("no-such-subject", 1)
    assert info.value.registry_error_code == 40401
    reg0 = client(registry.url, negative_ttl=0)
    for _ in range(2):
        with pytest.raises(UnknownSchema):
            reg0.get_schema_by_guid("00000000-0000-0000-0000-000000000000")
    assert sum(1 for r in registry.requests if r[1].startswith("/schemas/guids/")) == 2


def _traceback_depth(exc: BaseException) -> int:
    depth, tb = 0, exc.__traceback__
    while tb is not None:
        depth, tb = depth + 1, tb.tb_next
    return depth


def test_503_then_success_retries_with_growing_jittered_backoff(registry):
    schema_id = register_shop(registry)
    registry.fail_next(3, status=503)
    sleeps = Sleeps()
    reg = client(registry.url, sleep=sleeps, backoff_initial=0.1, backoff_max=10)
    schema = reg.get_schema_by_id(schema_id)
    assert schema.schema_type == "PROTOBUF" and schema.format == "text"
    assert registry.requests.count(("GET", f"/schemas/ids/{schema_id}")) == 4
    assert len(sleeps) == 3
    for attempt, delay in enumerate(sleeps):
        cap = 0.1 * 2**attempt
        assert cap / 2 <= delay <= cap  # equal jitter: half fixed, half random


@pytest.mark.parametrize("status", [408, 429, 500, 502, 504])
def test_other_retryable_statuses(registry, status):
    schema_id = register_shop(registry)
    registry.fail_next(1, status=status)
    assert client(registry.url).get_schema_by_id(schema_id).schema


def test_registry_that_stays_down_raises_registry_unavailable(registry):
    schema_id = register_shop(registry)
    registry.fail_next(100, status=503)
    sleeps = Sleeps()
    reg = client(registry.url, max_retries=3, sleep=sleeps)
    with pytest.raises(RegistryUnavailable) as info:
        reg.get_schema_by_id(schema_id)
    err = info.value
    assert (err.code, err.record_fault, err.http_status) == ("REGISTRY_UNAVAILABLE", False, 503)
    assert "failed 4 times" in err.message
    assert len(sleeps) == 3
    # The Decoder passes it on untouched: callers must retry or fail the batch.
    with pytest.raises(RegistryUnavailable):
        Decoder(reg).decode(write_frame(schema_id, [0], b""))


def test_read_timeout_is_retried(registry):
    schema_id = register_shop(registry)
    # the first answer comes long after the read timeout; the retry's within it, also on a
    # loaded machine (the server is a thread of this process)
    registry.delay_next(1, 4.0)
    sleeps = Sleeps()
    reg = client(registry.url, read_timeout=1.5, sleep=sleeps)
    assert reg.get_schema_by_id(schema_id).schema
    assert len(sleeps) == 1


def test_connection_refused_is_registry_unavailable_without_credentials(caplog):
    sleeps = Sleeps()
    reg = HttpSchemaRegistry(
        "http://bob:hunter2-secret@127.0.0.1:9/", max_retries=2, sleep=sleeps, connect_timeout=0.5
    )
    with caplog.at_level(logging.DEBUG, logger="codec"):
        with pytest.raises(RegistryUnavailable) as info:
            reg.get_schema_by_id(1)
    assert "Connection refused" in info.value.message or "timed out" in info.value.message
    assert len(sleeps) == 2
    everything = info.value.message + repr(info.value) + repr(reg) + caplog.text
    assert "hunter2-secret" not in everything and "bob:" not in everything
    assert "retry 1 of 2" in caplog.text


def test_basic_auth(auth_registry):
    schema_id = register_shop(auth_registry)
    with pytest.raises(RegistryUnavailable) as info:
        client(auth_registry.url).get_schema_by_id(schema_id)
    assert info.value.http_status == 401
    assert len(auth_registry.requests) == 1  # a refusal is not retried
    assert (
        client(auth_registry.url, basic_auth="alice:s3cret-pw").get_schema_by_id(schema_id).schema
    )
    with_url = auth_registry.url.replace("http://", "http://alice:s3cret-pw@")
    reg = client(with_url)
    assert reg.get_schema_by_id(schema_id).schema
    assert "s3cret-pw" not in repr(reg) and reg.url == auth_registry.url
    wrong = client(auth_registry.url, basic_auth=("alice", "not-the-pw"))
    with pytest.raises(RegistryUnavailable) as info:
        wrong.get_schema_by_id(schema_id)
    assert "refused the credentials" in info.value.message
    assert "not-the-pw" not in info.value.message + repr(info.value) + repr(wrong)


def test_bearer_token(bearer_server):
    url, seen = bearer_server
    assert client(url, bearer_token="tok-123").get_schema_by_id(1).schema_type == "PROTOBUF"
    assert seen[-1]["Authorization"] == "Bearer tok-123"
    with pytest.raises(RegistryUnavailable) as info:
        client(url, bearer_token="wrong-token").get_schema_by_id(1)
    assert info.value.http_status == 401 and "wrong-token" not in info.value.message
    with pytest.raises(ValueError, match="not both"):
        HttpSchemaRegistry(url, bearer_token="t", basic_auth="a:b")


def test_tls_with_ca_bundle_and_client_certificate(tls_server, certs):
    reg = client(
        tls_server,
        ca_bundle=str(certs / "ca.pem"),
        client_cert=(str(certs / "client.pem"), str(certs / "client.key")),
    )
    assert reg.get_schema_by_id(1).schema_type == "PROTOBUF"
    # Without our CA the server is not trusted; without a client certificate we are refused.
    with pytest.raises(RegistryUnavailable, match="TLS|SSL|Connection|reset|EOF"):
        client(tls_server, max_retries=0).get_schema_by_id(1)
    with pytest.raises(RegistryUnavailable):
        client(tls_server, ca_bundle=str(certs / "ca.pem"), max_retries=0).get_schema_by_id(1)


def test_registry_ignoring_format_serialized_answers_text_that_gets_compiled(
    text_only_registry, registry
):
    sid_text = register_shop(text_only_registry)
    sid_ser = register_shop(registry)
    text_reg = client(text_only_registry.url, request_format="serialized")
    ser_reg = client(registry.url, request_format="serialized")
    assert text_reg.get_schema_by_id(sid_text).format == "text"
    assert ser_reg.get_schema_by_id(sid_ser).format == "serialized"
    d_text, d_ser = Decoder(text_reg), Decoder(ser_reg)
    payload = order_payload(d_ser, sid_ser)
    a = d_text.decode(write_frame(sid_text, [0], payload))
    b = d_ser.decode(write_frame(sid_ser, [0], payload))
    assert a.to_json() == b.to_json() == {"id": "o-1", "total": {"units": "12"}}


def test_subjects_with_slashes_are_url_encoded_and_each_schema_fetched_once(registry):
    schema_id = register_shop(registry)
    registry.clear_requests()
    reg = client(registry.url)
    decoder = Decoder(reg)
    payload = order_payload(decoder, schema_id)
    guid = registry.guid_of(schema_id)
    for _ in range(50):
        decoder.decode(write_frame(schema_id, [0], payload))
        decoder.decode(payload, [("__value_schema_id", write_frame(guid, [0]))])
    paths = [p for _, p in registry.requests]
    assert paths.count(f"/schemas/ids/{schema_id}") == 1
    assert paths.count(f"/schemas/guids/{guid}") == 1
    assert paths.count("/subjects/shop%2Fcommon.proto/versions/1") == 1  # reference cached
    assert len(paths) == 3


def test_a_subjects_latest_version_is_asked_each_time_a_numbered_one_once(registry):
    subject = "latest-moves.proto"
    registry.register(subject, 'syntax = "proto3"; message A {}')
    reg = client(registry.url)
    assert "message A" in reg.get_version(subject, -1).schema  # -1: the latest, as "latest"
    registry.register(subject, 'syntax = "proto3"; message B {}')
    assert "message B" in reg.get_version(subject, -1).schema
    registry.clear_requests()
    for _ in range(3):
        assert "message A" in reg.get_version(subject, 1).schema
    assert [p for _, p in registry.requests] == [f"/subjects/{subject}/versions/1"]


def test_avro_schema_without_schema_type_is_not_protobuf(registry):
    schema_id = registry.register("avro-value", '{"type": "string"}', schema_type="AVRO")
    reg = client(registry.url)
    assert reg.get_schema_by_id(schema_id).schema_type == "AVRO"
    with pytest.raises(NotProtobuf):
        Decoder(reg).decode(write_frame(schema_id, [0], b"\x02a"))


def test_confluent_kafka_producer_frames_through_the_http_registry(registry, tmp_path):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    compile_protos(
        {
            "httpt/prod.proto": textwrap.dedent(
                """\
        syntax = "proto3";
        package httpt.prod;
        import "google/protobuf/timestamp.proto";
        message Event { string id = 1; map<string, string> attrs = 2;
          message Detail { google.protobuf.Timestamp at = 1; } Detail detail = 3; }
        """
            )
        },
        tmp_path,
    )
    prod = import_generated("httpt/prod.proto")
    sr = SchemaRegistryClient({"url": registry.url})
    detail = prod.Event.Detail()
    detail.at.seconds = 12
    value, _ = confluent_frame(sr, detail, "events")
    record = Decoder(client(registry.url)).decode(value)
    assert record.message_type == "httpt.prod.Event.Detail"
    assert record.message_indexes == (0, 1)  # AttrsEntry is nested message 0
    assert record.to_json() == {"at": "1970-01-01T00:00:12Z"}


def _cli(args, stdin=""):
    return subprocess.run(
        [sys.executable, "-m", "codec", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_decode_with_basic_auth(auth_registry):
    schema_id = register_shop(auth_registry)
    payload = order_payload(
        Decoder(client(auth_registry.url, basic_auth="alice:s3cret-pw")), schema_id
    )
    line = json.dumps(
        {"value": base64.b64encode(write_frame(schema_id, [0], payload)).decode(), "headers": []}
    )
    done = _cli(
        ["decode", "--registry-url", auth_registry.url, "--registry-user", "alice:s3cret-pw"],
        line + "\n",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "ok": True,
        "schema_id": schema_id,
        "schema_guid": None,
        "message_type": "httpt.shop.Order",
        "message_indexes": [0],
        "record": {"id": "o-1", "total": {"units": "12"}},
    }
    refused = _cli(
        ["decode", "--registry-url", auth_registry.url, "--registry-user", "alice:bad-pw"],
        line + "\n",
    )
    assert refused.returncode == 3
    assert len(refused.stderr.strip().splitlines()) == 1 and "401" in refused.stderr
    assert "bad-pw" not in refused.stderr


def test_cli_exits_non_zero_with_one_line_when_the_registry_is_unreachable():
    line = json.dumps({"value": base64.b64encode(write_frame(1, [0], b"")).decode()})
    empty = json.dumps({"value": None})
    done = _cli(
        ["decode", "--registry-url", "http://u:pw-x@127.0.0.1:9"], f"{empty}\n{line}\n{empty}\n"
    )
    assert done.returncode == 3
    assert json.loads(done.stdout)["error"]["code"] == "EMPTY_VALUE"  # answered before the outage
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "registry unavailable" in lines[0] and "pw-x" not in lines[0]


def test_malformed_references_are_the_registrys_fault_not_the_records(
    malformed_references_server,
):
    reg = client(malformed_references_server)
    decoder = Decoder(reg)
    for schema_id in (1, 2):
        with pytest.raises(RegistryUnavailable, match="malformed references"):
            reg.get_schema_by_id(schema_id)
        with pytest.raises(RegistryUnavailable):
            decoder.decode(write_frame(schema_id, [0], b""))
    line = json.dumps({"value": base64.b64encode(write_frame(1, [0], b"")).decode()})
    done = subprocess.run(
        [sys.executable, "-m", "codec", "decode", "--registry-url", malformed_references_server],
        input=line + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "malformed references" in done.stderr


def test_a_schema_registered_as_text_resolves_with_its_comments(registry):
    from codec import SchemaResolver
    from pipelines.proto_types import field_comments, message_comment

    text = (
        'syntax = "proto3";\npackage httpt.c;\n'
        "// A probe.\nmessage Ping {\n  // Its name.\n  string id = 1;\n}\n"
    )
    schema_id = registry.register("httpt-c-value", text)
    resolved = SchemaResolver(client(registry.url)).resolve_id(schema_id)
    assert field_comments(resolved.file_descriptor_set) == {"httpt.c.Ping.id": "Its name."}
    assert message_comment(resolved.file_descriptor_set, "httpt.c.Ping") == "A probe."
