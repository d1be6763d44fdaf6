"""`python -m codec decode|inspect` against a folder registry (the HTTP side is integration)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import pytest

from codec import Decoder, open_registry, write_frame

GUID = "6f1c9bd2-3c1e-4b1a-9a53-0d5b7b2f6c11"


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-registry")
    (root / "cli.proto").write_text(
        'syntax = "proto3";\npackage cli;\nmessage Event { string id = 1; int64 n = 2;\n'
        "  message Sub { bool ok = 1; } }\nmessage Other { string s = 1; }\n"
    )
    (root / "avro.avsc").write_text('{"type": "string"}')
    (root / "index.json").write_text(
        json.dumps(
            {
                "schemas": [
                    {"id": 5, "guid": GUID, "file": "cli.proto"},
                    {"id": 6, "file": "avro.avsc", "schema_type": "AVRO"},
                ]
            }
        )
    )
    return root


@pytest.fixture(scope="module")
def event_class(folder):
    return Decoder(open_registry(folder)).resolver.resolve_id(5).message_class_for((0,))


def run(args, stdin="", env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    env.pop("PROTOLAKE_REGISTRY_URL", None) if env_extra is None else None
    return subprocess.run(
        [sys.executable, "-m", "codec", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_decode_answers_every_line_in_order(folder, event_class):
    payload = event_class(id="e1", n=2**40).SerializeToString()
    sub = b"\x08\x01"
    lines = [
        {"value": b64(write_frame(5, [0], payload)), "headers": []},
        {
            "value": b64(sub),
            "headers": [["__value_schema_id", b64(write_frame(GUID, [0, 0]))], ["other", None]],
        },
        {"value": None, "headers": []},
        {"value": b64(b"\x09garbage")},
        {"value": b64(write_frame(6, [0], b""))},
        {"value": b64(write_frame(77, [0], b""))},
        {"value": b64(write_frame(5, [3], b""))},
        {"value": b64(write_frame(5, [0], b"\x0a\x01"))},
        {"value": b64(write_frame(5, [0], b"\x18\x01"))},
        {"value": b64(write_frame(5, [0, 0], sub))},
    ]
    stdin = "\n".join(json.dumps(line) for line in lines) + "\n\n" + "not json\n" + '{"value": 5}\n'
    done = run(["decode", "--registry-url", f"dir:{folder}"], stdin)
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(out) == len(lines) + 3  # every line is answered, the blank one too
    assert out[0] == {
        "ok": True,
        "schema_id": 5,
        "schema_guid": None,
        "message_type": "cli.Event",
        "message_indexes": [0],
        "record": {"id": "e1", "n": str(2**40)},
    }
    assert out[1]["ok"] is True and out[1]["schema_guid"] == GUID and out[1]["schema_id"] is None
    assert out[1]["message_type"] == "cli.Event.Sub" and out[1]["message_indexes"] == [0, 0]
    assert out[1]["record"] == {"ok": True}
    codes = [o["error"]["code"] if not o["ok"] else None for o in out[2:]]
    assert codes == [
        "EMPTY_VALUE",
        "BAD_MAGIC",
        "NOT_PROTOBUF",
        "UNKNOWN_SCHEMA",
        "UNKNOWN_MESSAGE",
        "BAD_PAYLOAD",
        "UNKNOWN_FIELDS",
        None,
        "BAD_INPUT",
        "BAD_INPUT",
        "BAD_INPUT",
    ]
    assert "an empty line" in out[-3]["error"]["message"]
    assert out[9]["record"] == {"ok": True}
    assert all(o["error"]["message"] for o in out if not o["ok"])


def test_decode_takes_the_url_from_the_environment(folder, event_class):
    line = json.dumps({"value": b64(write_frame(5, [0], event_class(id="x").SerializeToString()))})
    done = run(["decode"], line + "\n", env_extra={"PROTOLAKE_REGISTRY_URL": f"dir:{folder}"})
    assert json.loads(done.stdout)["record"] == {"id": "x"}
    missing = run(["decode"], line)
    assert missing.returncode == 2 and "--registry-url" in missing.stderr


def test_inspect_shows_the_framing_and_the_message(folder, event_class):
    value = write_frame(5, [0], event_class(id="e7").SerializeToString())
    done = run(["inspect", value.hex(), "--registry-url", f"dir:{folder}"])
    assert done.returncode == 0, done.stderr
    assert "magic:            0x00 (schema id)" in done.stdout
    assert "schema id:        5" in done.stdout
    assert "message indexes:  [0]" in done.stdout
    assert f"payload:          {len(value) - 6} bytes at offset 6" in done.stdout
    assert "resolved type:    cli.Event" in done.stdout
    assert '"id": "e7"' in done.stdout
    # base64 works too, and so does a header; without a registry only the framing is shown.
    header = write_frame(GUID, [1])
    done = run(["inspect", b64(b"\x0a\x01s"), "--header", f"__value_schema_id={header.hex()}"])
    assert done.returncode == 0
    assert "framing:          header" in done.stdout and GUID in done.stdout
    assert "no registry" in done.stdout


def test_inspect_reports_the_reason(folder):
    done = run(["inspect", "ff00", "--registry-url", f"dir:{folder}"])
    assert done.returncode == 1
    assert "BAD_MAGIC" in done.stdout
    done = run(["inspect", write_frame(5, [9]).hex(), "--registry-url", f"dir:{folder}"])
    assert done.returncode == 1 and "UNKNOWN_MESSAGE" in done.stdout


def test_decode_answers_malformed_lines_without_stopping(folder, event_class):
    good = write_frame(5, [0], event_class(id="ok").SerializeToString())
    noisy = b64(good)[:4] + "!*" + b64(good)[4:]  # characters outside base64, inside a frame
    url_safe = base64.urlsafe_b64encode(b"\xfb\xff" + good).decode().rstrip("=")
    lines = [
        b"[" * 100_000,  # nested too deeply for the JSON parser
        b'{"value": "\xff\xfe"}',  # not UTF-8
        json.dumps({"value": noisy}).encode(),
        json.dumps({"value": "!!!!"}).encode(),
        json.dumps({"value": "aGVsbG8 gd29ybGQ="}).encode(),
        json.dumps({}).encode(),  # no "value": not a tombstone, a mistake
        json.dumps({"value": b64(good), "headers": {"a": "b"}}).encode(),
        json.dumps({"value": b64(good), "headers": [["__value_schema_id"]]}).encode(),
        json.dumps({"value": b64(good), "headers": ["ab"]}).encode(),
        json.dumps({"value": url_safe}).encode(),  # URL-safe alphabet, no padding: accepted
        json.dumps({"value": b64(good), "headers": None}).encode(),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "codec", "decode", "--registry-url", f"dir:{folder}"],
        input=b"\n".join(lines) + b"\n",
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8", "LC_ALL": "C"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in done.stdout.splitlines()]
    codes = [o["error"]["code"] if not o["ok"] else None for o in out]
    assert codes == ["BAD_INPUT"] * 9 + ["BAD_MAGIC", None]
    messages = [o["error"]["message"] for o in out[:9]]
    assert "nested too deeply" in messages[0] and "not UTF-8" in messages[1]
    assert all("is not base64" in m for m in messages[2:5])
    assert '"value"' in messages[5] and '"headers" must be a list' in messages[6]
    assert out[10]["record"] == {"id": "ok"}


def test_a_zero_count_written_long_still_means_the_first_message(folder, event_class):
    payload = event_class(id="z").SerializeToString()
    decoder = Decoder(open_registry(folder))
    for indexes in (b"\x00", b"\x80\x00", b"\x02\x00"):
        record = decoder.decode(b"\x00\x00\x00\x00\x05" + indexes + payload)
        assert (record.message_indexes, record.message.id) == ((0,), "z")
        assert record.frame.payload_offset == 5 + len(indexes)


def test_a_bad_registry_argument_never_echoes_credentials():
    for url in ("bob:s3cret@sr.example:8081", "http//bob:s3cret@sr.example:8081"):
        done = run(["decode", "--registry-url", url], "")
        assert done.returncode != 0 and "sr.example:8081" in done.stderr
        assert "s3cret" not in done.stderr and "bob" not in done.stderr


def test_a_carriage_return_is_not_a_line_end(folder, event_class):
    """Only "\n" ends a line: "\r" is JSON whitespace (a CRLF file works too)."""
    good = b64(write_frame(5, [0], event_class(id="cr").SerializeToString()))
    stdin = (
        b'{"value": null,\r"headers": []}\n'
        + b'{"value": "'
        + good.encode()
        + b'"}\r\n'
        + b"\r\n"
        + b'{"value": "'
        + good.encode()
        + b'"}'  # the last line needs no line end
    )
    done = subprocess.run(
        [sys.executable, "-m", "codec", "decode", "--registry-url", f"dir:{folder}"],
        input=stdin,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert [o["ok"] or o["error"]["code"] for o in out] == [
        "EMPTY_VALUE",
        True,
        "BAD_INPUT",
        True,
    ]
    assert out[1]["record"] == out[3]["record"] == {"id": "cr"}


def test_the_user_from_the_environment_is_for_http_registries_only(folder, event_class):
    line = json.dumps({"value": b64(write_frame(5, [0], event_class(id="u").SerializeToString()))})
    done = run(
        ["decode", "--registry-url", f"dir:{folder}"],
        line + "\n",
        env_extra={"PROTOLAKE_REGISTRY_USER": "alice:s3cret"},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["record"] == {"id": "u"}
    given = run(["decode", "--registry-url", f"dir:{folder}", "--registry-user", "a:b"], line)
    assert given.returncode != 0 and "needs an http(s) registry URL" in given.stderr


def test_inspect_reads_text_that_is_both_hex_and_base64_as_a_frame(folder, event_class):
    value = write_frame(1, [0], b"")  # 00 00000001 00
    as_b64 = b64(value)  # "AAAAAAEA": all hex digits too
    assert all(c in "0123456789abcdefABCDEF" for c in as_b64)
    done = run(["inspect", as_b64])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "input:            base64 (it reads as hex too" in done.stdout
    assert "schema id:        1" in done.stdout
    forced = run(["inspect", f"hex:{as_b64}"])
    assert "input:            hex\n" in forced.stdout and "BAD_MAGIC" in forced.stdout
    upper = run(["inspect", "0X" + value.hex().upper()])
    assert "input:            hex\n" in upper.stdout and "schema id:        1" in upper.stdout
    both_hex = run(["inspect", "0000000005000a0178"])  # hex: a frame; base64: d3 4d 34 ...
    assert "input:            hex (it reads as base64 too" in both_hex.stdout
    assert "schema id:        5" in both_hex.stdout
    bad = run(["inspect", "base64:!!"])
    assert bad.returncode != 0 and "is not base64" in bad.stderr
