"""infra/registry_server at the HTTP level: response shapes, encodings, options."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest
import requests
from google.protobuf import descriptor_pb2
from registry_server import start_registry_server

pytestmark = pytest.mark.integration

CT = "application/vnd.schemaregistry.v1+json"
PROTO = 'syntax = "proto3";\npackage http;\nmessage A { string x = 1; }\n'


def _post(url: str, body: dict) -> requests.Response:
    return requests.post(url, data=json.dumps(body), headers={"Content-Type": CT}, timeout=10)


def test_root_and_types(registry):
    root = requests.get(registry.url + "/", timeout=5)
    assert (root.status_code, root.json()) == (200, {})
    assert root.headers["Content-Type"] == CT
    assert requests.get(registry.url + "/schemas/types", timeout=5).json() == [
        "AVRO",
        "JSON",
        "PROTOBUF",
    ]


def test_register_and_read_shapes(registry):
    subject = "shop/common.proto"  # a '/' in a subject travels as %2F
    url = f"{registry.url}/subjects/{quote(subject, safe='')}"
    created = _post(url + "/versions", {"schema": PROTO, "schemaType": "PROTOBUF"})
    assert created.status_code == 200
    body = created.json()
    assert set(body) == {"id", "guid"}
    schema_id, guid = body["id"], body["guid"]
    assert len(guid) == 36 and guid == guid.lower()

    assert requests.get(registry.url + "/subjects", timeout=5).json() == [subject]
    assert requests.get(url + "/versions", timeout=5).json() == [1]
    latest = requests.get(url + "/versions/latest", timeout=5).json()
    assert latest == {
        "subject": subject,
        "version": 1,
        "id": schema_id,
        "guid": guid,
        "schemaType": "PROTOBUF",
        "schema": PROTO,
    }
    assert requests.get(url + "/versions/-1", timeout=5).json() == latest
    assert requests.get(url + "/versions/1/schema", timeout=5).json() == PROTO
    by_id = requests.get(f"{registry.url}/schemas/ids/{schema_id}", timeout=5).json()
    assert by_id == {"schemaType": "PROTOBUF", "schema": PROTO, "guid": guid}
    by_guid = requests.get(f"{registry.url}/schemas/guids/{guid}", timeout=5).json()
    assert by_guid == by_id
    assert requests.get(f"{registry.url}/schemas/ids/{schema_id}/versions", timeout=5).json() == [
        {"subject": subject, "version": 1}
    ]
    looked_up = _post(url, {"schema": PROTO, "schemaType": "PROTOBUF"}).json()
    assert looked_up == latest


def test_avro_omits_schema_type(registry):
    avro = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
    schema_id = _post(registry.url + "/subjects/r-value/versions", {"schema": avro}).json()["id"]
    body = requests.get(f"{registry.url}/schemas/ids/{schema_id}", timeout=5).json()
    assert "schemaType" not in body
    assert body["schema"] == avro


def test_serialized_format_and_the_option_to_ignore_it(registry):
    schema_id = registry.register("a-value", PROTO)
    serialized = requests.get(
        f"{registry.url}/schemas/ids/{schema_id}", params={"format": "serialized"}, timeout=5
    ).json()["schema"]
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert (fdp.package, fdp.message_type[0].name) == ("http", "A")

    ignoring = start_registry_server(ignore_format_serialized=True)
    try:
        other_id = ignoring.register("a-value", PROTO)
        answered = requests.get(
            f"{ignoring.url}/schemas/ids/{other_id}", params={"format": "serialized"}, timeout=5
        ).json()["schema"]
        assert answered == PROTO
    finally:
        ignoring.stop()


def test_error_bodies(registry):
    cases = {
        "/subjects/nope/versions": (404, 40401),
        "/subjects/nope/versions/1": (404, 40401),
        "/schemas/ids/77": (404, 40403),
        "/schemas/ids/notanumber": (404, 40403),
        "/no/such/route": (404, 404),
    }
    registry.register("s-value", PROTO)
    cases["/subjects/s-value/versions/2"] = (404, 40402)
    cases["/subjects/s-value/versions/zero"] = (422, 42202)
    for path, (status, code) in cases.items():
        resp = requests.get(registry.url + path, timeout=5)
        assert resp.status_code == status, path
        assert resp.headers["Content-Type"] == CT
        assert resp.json()["error_code"] == code, path
        assert isinstance(resp.json()["message"], str)
    bad = _post(registry.url + "/subjects/x/versions", {"schemaType": "PROTOBUF"})
    assert (bad.status_code, bad.json()["error_code"]) == (422, 42201)


def test_registered_reference_versions_are_pinned(registry):
    registry.register("dep.proto", 'syntax = "proto3";\npackage dep;\nmessage D { int32 v = 1; }\n')
    main = 'syntax = "proto3";\npackage m;\nimport "dep.proto";\nmessage M { dep.D d = 1; }\n'
    schema_id = registry.register("m-value", main, references=[("dep.proto", "dep.proto", -1)])
    body = requests.get(f"{registry.url}/schemas/ids/{schema_id}", timeout=5).json()
    assert body["references"] == [{"name": "dep.proto", "subject": "dep.proto", "version": 1}]
    assert requests.get(
        registry.url + "/subjects/dep.proto/versions/1/referencedby", timeout=5
    ).json() == [schema_id]
    # A referenced schema cannot go while the referrer lives (Confluent's 42206).
    refused = requests.delete(registry.url + "/subjects/dep.proto", timeout=5)
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42206)
    refused = requests.delete(registry.url + "/subjects/dep.proto/versions/1", timeout=5)
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42206)
    assert requests.delete(registry.url + "/subjects/m-value", timeout=5).json() == [1]
    assert requests.delete(registry.url + "/subjects/dep.proto", timeout=5).json() == [1]


def test_fail_next_and_delay_next(registry):
    registry.fail_next(2, status=500)
    first = requests.get(registry.url + "/subjects", timeout=5)
    second = requests.get(registry.url + "/subjects", timeout=5)
    third = requests.get(registry.url + "/subjects", timeout=5)
    assert [first.status_code, second.status_code, third.status_code] == [500, 500, 200]
    assert first.json() == {"error_code": 50003, "message": "injected fault"}

    registry.delay_next(1, 1.0)
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(registry.url + "/subjects", timeout=0.3)
    assert requests.get(registry.url + "/subjects", timeout=5).status_code == 200


def test_persistence_survives_a_restart(tmp_path):
    data = tmp_path / "registry.json"
    first = start_registry_server(data=str(data))
    try:
        schema_id = first.register("p-value", PROTO)
        guid = first.guid_of(schema_id)
        requests.put(first.url + "/config", json={"compatibility": "NONE"}, timeout=5)
    finally:
        first.stop()
    second = start_registry_server(data=str(data))
    try:
        assert (
            requests.get(f"{second.url}/schemas/guids/{guid}", timeout=5).json()["schema"] == PROTO
        )
        assert requests.get(second.url + "/subjects", timeout=5).json() == ["p-value"]
        assert requests.get(second.url + "/config", timeout=5).json() == {
            "compatibilityLevel": "NONE"
        }
        new_id = second.register("q-value", PROTO.replace("string x", "int64 x"))
        assert new_id == schema_id + 1  # ids continue, never reused
    finally:
        second.stop()


def test_basic_auth_answers_401_with_a_challenge():
    handle = start_registry_server(users=["bob:pw-123"])
    try:
        resp = requests.get(handle.url + "/subjects", timeout=5)
        assert resp.status_code == 401
        assert resp.headers["WWW-Authenticate"].startswith("Basic")
        assert resp.json()["error_code"] == 40101
        assert (
            requests.get(handle.url + "/subjects", auth=("bob", "pw-123"), timeout=5).json() == []
        )
        assert (
            requests.get(handle.url + "/subjects", auth=("bob", "x"), timeout=5).status_code == 401
        )
    finally:
        handle.stop()


def test_script_runs_and_persists(tmp_path):
    import signal
    import socket
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tmp_path / "r.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "infra.registry_server", "--port", str(port), "--data", str(data)],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                requests.get(url + "/", timeout=1)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "registry script did not start"
                time.sleep(0.1)
        _post(url + "/subjects/s/versions", {"schema": PROTO, "schemaType": "PROTOBUF"})
        assert json.loads(data.read_text())["subjects"]["s"][0]["version"] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
