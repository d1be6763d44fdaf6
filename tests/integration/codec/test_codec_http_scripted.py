"""HttpSchemaRegistry against a small real HTTP server on loopback that plays scripted
answers: credentials on the wire, Retry-After values, 404s without Confluent's codes."""

from __future__ import annotations

import base64

import pytest

from codec.http_registry import HttpSchemaRegistry

pytestmark = pytest.mark.integration

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


def test_netrc_credentials_for_the_host_never_replace_the_configured_ones(
    server, tmp_path, monkeypatch
):
    # requests takes ~/.netrc's entry for a host when its session has no `auth` of its own
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login netrcuser password netrcpass\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    HttpSchemaRegistry(server["url"], bearer_token="tok123456").get_schema_by_id(1)
    assert server["seen"][-1][1]["Authorization"] == "Bearer tok123456"
    HttpSchemaRegistry(server["url"], basic_auth="alice:pw").get_schema_by_id(2)
    sent = server["seen"][-1][1]["Authorization"]
    assert sent == "Basic " + base64.b64encode(b"alice:pw").decode()
    HttpSchemaRegistry(server["url"]).get_schema_by_id(3)  # none configured: none sent
    assert "Authorization" not in server["seen"][-1][1]
    # a redirect to the same host: requests would put the netrc entry there
    server["answers"] = [(302, {"Location": "/schemas/ids/5"}, b""), (200, {}, SCHEMA_BODY)]
    HttpSchemaRegistry(server["url"], bearer_token="tok123456").get_schema_by_id(4)
    assert [(p.split("?")[0], h["Authorization"]) for p, h in server["seen"][-2:]] == [
        ("/schemas/ids/4", "Bearer tok123456"),
        ("/schemas/ids/5", "Bearer tok123456"),
    ]
    # the same with a session of the caller's own
    import requests

    server["answers"] = [(302, {"Location": "/schemas/ids/7"}, b""), (200, {}, SCHEMA_BODY)]
    reg = HttpSchemaRegistry(server["url"], bearer_token="tok123456", session=requests.Session())
    reg.get_schema_by_id(6)
    assert [(p.split("?")[0], h["Authorization"]) for p, h in server["seen"][-2:]] == [
        ("/schemas/ids/6", "Bearer tok123456"),
        ("/schemas/ids/7", "Bearer tok123456"),
    ]


@pytest.mark.parametrize("retry_after", ["nan", "inf", "-inf", "NaN"])
def test_a_retry_after_that_is_not_a_finite_number_uses_our_backoff(server, retry_after):
    server["answers"] = [(503, {"Retry-After": retry_after}, b"{}"), (200, {}, SCHEMA_BODY)]
    waits = []
    reg = HttpSchemaRegistry(server["url"], backoff_initial=0.5, sleep=waits.append)
    assert reg.get_schema_by_id(4).schema_type == "PROTOBUF"
    assert len(waits) == 1 and 0.25 <= waits[0] <= 0.5


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
