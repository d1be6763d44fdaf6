"""HttpSchemaRegistry pieces that need no server: format detection, credentials, backoff."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from codec.http_registry import HttpSchemaRegistry, _split_credentials, detect_schema_format


def test_detect_schema_format():
    proto = descriptor_pb2.FileDescriptorProto(name="x.proto", package="p")
    proto.message_type.add(name="M")
    encoded = base64.b64encode(proto.SerializeToString()).decode()
    assert detect_schema_format(encoded) == "serialized"
    assert detect_schema_format('syntax = "proto3"; message M {}') == "text"
    assert detect_schema_format("") == "text"
    assert detect_schema_format("////") == "text"  # base64 alphabet, but not a descriptor


def test_credentials_are_split_from_the_url():
    assert _split_credentials("http://h:1/") == ("http://h:1", None)
    assert _split_credentials("https://u%40x:p%3Aw@h/base/") == ("https://h/base", ("u@x", "p:w"))
    with pytest.raises(ValueError):
        _split_credentials("h:8081")


def test_backoff_is_exponential_jittered_capped_and_honours_retry_after():
    reg = HttpSchemaRegistry("http://127.0.0.1:1", backoff_initial=0.5, backoff_max=3.0)
    for attempt in range(8):
        cap = min(3.0, 0.5 * 2**attempt)
        delays = {reg._delay(attempt, None) for _ in range(50)}
        assert all(cap / 2 <= d <= cap for d in delays)
        assert len(delays) > 1  # jittered
    assert reg._delay(0, "2") == 2.0
    assert reg._delay(0, "120") == 3.0  # capped
    assert 0.25 <= reg._delay(0, "Wed, 21 Oct 2015 07:28:00 GMT") <= 0.5


def test_repr_and_errors_hide_secrets():
    reg = HttpSchemaRegistry("https://me:topsecret@h:8443", request_format=None)
    assert repr(reg) == "HttpSchemaRegistry(url='https://h:8443', auth='basic')"
    token = HttpSchemaRegistry("https://h", bearer_token="tok-secret")
    assert "tok-secret" not in repr(token)
    assert token._redact("x tok-secret y") == "x *** y"


# -- answers of a small real HTTP server ----------------------------------------------------

SCHEMA_BODY = b'{"schema": "syntax = \\"proto3\\"; message M {}", "schemaType": "PROTOBUF"}'


@pytest.fixture
def server():
    """A real HTTP server on loopback that records each request and plays scripted answers:
    `answers` is a list of (status, headers, body), the last one repeated."""
    import http.server
    import threading

    state = {"answers": [(200, {}, SCHEMA_BODY)], "seen": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            state["seen"].append((self.path, dict(self.headers)))
            answers = state["answers"]
            status, headers, body = answers.pop(0) if len(answers) > 1 else answers[0]
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state["url"] = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield state
    httpd.shutdown()
    httpd.server_close()


def test_credentials_beyond_latin1_are_sent_as_utf8(server):
    reg = HttpSchemaRegistry(server["url"], basic_auth="jörg:pa€ss", request_format=None)
    assert reg.get_schema_by_id(1).schema_type == "PROTOBUF"
    sent = server["seen"][-1][1]["Authorization"]
    assert sent == "Basic " + base64.b64encode("jörg:pa€ss".encode()).decode()
    reg = HttpSchemaRegistry(
        server["url"].replace("//", "//j%C3%B6rg:pa%E2%82%ACss@"), request_format=None
    )
    reg.get_schema_by_id(2)
    assert server["seen"][-1][1]["Authorization"] == sent
    HttpSchemaRegistry(server["url"], bearer_token="eyJ.abc-_~+/x==").get_schema_by_id(3)
    assert server["seen"][-1][1]["Authorization"] == "Bearer eyJ.abc-_~+/x=="
    with pytest.raises(ValueError, match="bearer token must be") as info:
        HttpSchemaRegistry(server["url"], bearer_token="tök secret")
    assert "tök" not in str(info.value)


def test_tls_files_that_do_not_exist_are_refused_at_once(tmp_path):
    with pytest.raises(ValueError, match="CA bundle .*nope.pem' does not exist"):
        HttpSchemaRegistry("https://h", ca_bundle=str(tmp_path / "nope.pem"))
    (tmp_path / "cert.pem").write_text("x")
    with pytest.raises(ValueError, match="client certificate .*key.pem' does not exist"):
        HttpSchemaRegistry(
            "https://h", client_cert=(str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
        )


@pytest.mark.parametrize("retry_after", ["nan", "inf", "-inf", "NaN"])
def test_a_retry_after_that_is_not_a_finite_number_uses_our_backoff(server, retry_after):
    server["answers"] = [(503, {"Retry-After": retry_after}, b"{}"), (200, {}, SCHEMA_BODY)]
    waits = []
    reg = HttpSchemaRegistry(server["url"], backoff_initial=0.5, sleep=waits.append)
    assert reg.get_schema_by_id(4).schema_type == "PROTOBUF"
    assert len(waits) == 1 and 0.25 <= waits[0] <= 0.5


@pytest.mark.parametrize(
    "url",
    [
        "http://svc:99/top-secret@registry.internal:8081",
        "http://svc:ab?cd@registry.internal:8081",
        "http://svc:ab#cd@registry.internal:8081",
    ],
)
def test_a_password_that_ends_the_host_early_is_refused_and_not_shown(url):
    with pytest.raises(ValueError, match="percent-encode") as info:
        HttpSchemaRegistry(url)
    assert "top-secret" not in str(info.value) and "cd" not in str(info.value)


def test_short_secrets_are_redacted_where_they_stand_alone_only():
    reg = HttpSchemaRegistry("http://on:pw@h")
    text = "ConnectionError: connection refused for on:pw@h"
    assert reg._redact(text) == "ConnectionError: connection refused for ***:***@h"
    long = HttpSchemaRegistry("http://someone:a-long-secret@h")
    assert long._redact("xa-long-secretx") == "x***x"
    sent = base64.b64encode(b"someone:a-long-secret").decode()
    assert long._redact(f"echo: Authorization: Basic {sent}") == "echo: Authorization: Basic ***"


def test_a_404_names_its_cause(server):
    from codec import RegistryUnavailable, UnknownSchema

    server["answers"] = [(404, {}, b'{"error_code": 404, "message": "HTTP 404 Not Found"}')]
    reg = HttpSchemaRegistry(server["url"])
    with pytest.raises(RegistryUnavailable, match="not a Confluent 4040x code"):
        reg.get_schema_by_id(5)
    # Confluent cannot route an id above 2^31-1 (a Java int) and says 404 without its code:
    # no registry has that schema, so it is the record's fault, not an outage
    with pytest.raises(UnknownSchema, match="above 2.31-1") as info:
        reg.get_schema_by_id(2**31)
    assert info.value.record_fault
    server["answers"] = [(404, {}, b"<html>not found</html>")]
    with pytest.raises(RegistryUnavailable, match="no Confluent error body"):
        HttpSchemaRegistry(server["url"]).get_schema_by_id(6)
