"""HTTP registry client pieces that need no server: format detection, credentials, backoff."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from codec.http_answers import detect_schema_format
from codec.http_auth import RegistryAuth, split_credentials
from codec.http_registry import HttpSchemaRegistry
from codec.http_transport import Backoff


def test_detect_schema_format():
    proto = descriptor_pb2.FileDescriptorProto(name="x.proto", package="p")
    proto.message_type.add(name="M")
    encoded = base64.b64encode(proto.SerializeToString()).decode()
    assert detect_schema_format(encoded) == "serialized"
    assert detect_schema_format('syntax = "proto3"; message M {}') == "text"
    assert detect_schema_format("") == "text"
    assert detect_schema_format("////") == "text"  # base64 alphabet, but not a descriptor


def test_credentials_are_split_from_the_url():
    assert split_credentials("http://h:1/") == ("http://h:1", None)
    assert split_credentials("https://u%40x:p%3Aw@h/base/") == ("https://h/base", ("u@x", "p:w"))
    with pytest.raises(ValueError):
        split_credentials("h:8081")


def test_backoff_is_exponential_jittered_capped_and_honours_retry_after():
    backoff = Backoff(initial=0.5, maximum=3.0)
    for attempt in range(8):
        cap = min(3.0, 0.5 * 2**attempt)
        delays = {backoff.delay(attempt, None) for _ in range(50)}
        assert all(cap / 2 <= d <= cap for d in delays)
        assert len(delays) > 1  # jittered
    assert backoff.delay(0, "2") == 2.0
    assert backoff.delay(0, "120") == 3.0  # capped
    assert 0.25 <= backoff.delay(0, "Wed, 21 Oct 2015 07:28:00 GMT") <= 0.5


def test_repr_and_errors_hide_secrets():
    reg = HttpSchemaRegistry("https://me:topsecret@h:8443", request_format=None)
    assert repr(reg) == "HttpSchemaRegistry(url='https://h:8443', auth='basic')"
    token = HttpSchemaRegistry("https://h", bearer_token="tok-secret")
    assert "tok-secret" not in repr(token)
    auth = RegistryAuth("https://h", bearer_token="tok-secret")
    assert "tok-secret" not in repr(auth)
    assert auth.redact("x tok-secret y") == "x *** y"


def test_tls_files_that_do_not_exist_are_refused_at_once(tmp_path):
    with pytest.raises(ValueError, match="CA bundle .*nope.pem' does not exist"):
        HttpSchemaRegistry("https://h", ca_bundle=str(tmp_path / "nope.pem"))
    (tmp_path / "cert.pem").write_text("x")
    with pytest.raises(ValueError, match="client certificate .*key.pem' does not exist"):
        HttpSchemaRegistry(
            "https://h", client_cert=(str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
        )


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
    auth = RegistryAuth("http://on:pw@h")
    text = "ConnectionError: connection refused for on:pw@h"
    assert auth.redact(text) == "ConnectionError: connection refused for ***:***@h"
    long = RegistryAuth("http://someone:a-long-secret@h")
    assert long.redact("xa-long-secretx") == "x***x"
    sent = base64.b64encode(b"someone:a-long-secret").decode()
    assert long.redact(f"echo: Authorization: Basic {sent}") == "echo: Authorization: Basic ***"
