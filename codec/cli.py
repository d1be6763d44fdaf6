"""Command line of the codec (`python -m codec`); acceptance tests use it exactly.

decode: `python -m codec decode --registry-url URL [--registry-user USER:PASS]`
    reads JSON lines on stdin, `{"value": <base64 or null>, "headers": [[<key>, <base64 or
    null>], ...]}`, and writes exactly one JSON line per input line, in order:
    `{"ok": true, "schema_id": <int or null>, "schema_guid": <str or null>, "message_type":
    "<full.Name>", "message_indexes": [..], "record": <canonical JSON, .proto field names>}`
    or `{"ok": false, "error": {"code": "<CODE>", "message": "<text>"}}`. A line that is not
    such an object is answered with code "BAD_INPUT"; blank lines are skipped.
    Exit 0 when every line was answered. When the registry is unreachable (or refuses the
    credentials) the lines answered so far stay written, one line goes to stderr and the exit
    status is 3.

inspect: `python -m codec inspect <hex or base64> [--header KEY=HEX_OR_BASE64]...
    [--registry-url URL] [--registry-user USER:PASS]` shows the framing (magic, id or GUID,
    indexes, payload size) and, with a registry, the resolved type and decoded message or the
    reason it does not decode. Exit 0 decoded (or framing shown without a registry), 1 the
    record does not decode, 3 registry unavailable.

The registry URL defaults to $PROTOLAKE_REGISTRY_URL and the user to
$PROTOLAKE_REGISTRY_USER; a URL may also be `dir:/path` (a folder registry). Other exit
statuses: 2 usage error (argparse).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import io
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, TextIO, cast

from .decode import Decoder, message_to_json
from .errors import CodecError, RegistryUnavailable
from .framing import Frame, parse_frame
from .registries import open_registry
from .registry import SchemaRegistry

EXIT_OK = 0
EXIT_RECORD_ERROR = 1
EXIT_REGISTRY_UNAVAILABLE = 3

_HEX = re.compile(r"(?:0[xX])?((?:[0-9a-fA-F]{2})+)")


_URLSAFE = str.maketrans("-_", "+/")


def _b64(text: str) -> bytes:
    """Standard or URL-safe base64, padding optional; anything else is a ValueError.

    Strict: a character outside the alphabet is an error, never silently dropped.
    """
    padding = -len(text) % 4
    if padding == 3:
        raise ValueError(f"{text[:40]!r} is not base64 (its length is 1 more than a multiple of 4)")
    try:
        return base64.b64decode(text.translate(_URLSAFE) + "=" * padding, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{text[:40]!r} is not base64") from None


def _parse_line(line: str) -> tuple[bytes | None, list[tuple[str, bytes | None]]]:
    """One input line -> (value, headers); ValueError/TypeError/KeyError when malformed."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the line is not UTF-8 text") from None
    try:
        obj = json.loads(line)
    except RecursionError:
        raise ValueError("the line is JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise TypeError("each line must be a JSON object")
    if "value" not in obj:
        raise KeyError('each line needs "value": base64 text, or null for a tombstone')
    raw = obj["value"]
    if raw is not None and not isinstance(raw, str):
        raise TypeError('"value" must be base64 text or null')
    value = None if raw is None else _b64(raw)
    items = obj.get("headers")
    if items is not None and not isinstance(items, list):
        raise TypeError('"headers" must be a list of [<key>, <base64 or null>] pairs')
    headers: list[tuple[str, bytes | None]] = []
    for item in items or ():
        if not (isinstance(item, list) and len(item) == 2):
            raise TypeError("each header must be [<key string>, <base64 or null>]")
        key, header = item
        if not isinstance(key, str) or not (header is None or isinstance(header, str)):
            raise TypeError("each header must be [<key string>, <base64 or null>]")
        headers.append((key, None if header is None else _b64(header)))
    return value, headers


def _open(args: argparse.Namespace) -> SchemaRegistry:
    url = args.registry_url
    http = url.startswith(("http://", "https://"))
    if args.registry_user and not http:
        raise SystemExit("codec: --registry-user needs an http(s) registry URL")
    user = args.registry_user or (os.environ.get("PROTOLAKE_REGISTRY_USER") if http else None)
    options = {"basic_auth": user} if user else {}
    try:
        return open_registry(url, **options)
    except ValueError as exc:
        raise SystemExit(f"codec: {exc}") from None


def run_decode(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """The `decode` command."""
    if not args.registry_url:
        stderr.write("codec: give --registry-url or set PROTOLAKE_REGISTRY_URL\n")
        return 2
    registry = _open(args)
    decoder = Decoder(registry, allow_unknown_fields=args.allow_unknown_fields)
    try:
        for line in stdin:
            answer: dict[str, Any]
            try:
                if not line.strip():  # answered too: one answer per line, whatever it holds
                    raise ValueError("an empty line: each line must be a JSON object")
                value, headers = _parse_line(line)
            except (ValueError, TypeError, KeyError) as exc:
                message = exc.args[0] if isinstance(exc, KeyError) else str(exc)
                answer = {"ok": False, "error": {"code": "BAD_INPUT", "message": message}}
            else:
                try:
                    record = decoder.decode(value, headers, is_key=args.key)
                    answer = {
                        "ok": True,
                        "schema_id": record.schema_id,
                        "schema_guid": record.schema_guid,
                        "message_type": record.message_type,
                        "message_indexes": list(record.message_indexes),
                        "record": record.to_json(),
                    }
                except RegistryUnavailable as exc:
                    stdout.flush()
                    stderr.write(f"codec: {exc.summary}: {exc.message}\n")
                    return EXIT_REGISTRY_UNAVAILABLE
                except CodecError as exc:
                    answer = {"ok": False, "error": {"code": exc.code, "message": exc.message}}
            stdout.write(json.dumps(answer) + "\n")
            stdout.flush()
    finally:
        registry.close()
    return EXIT_OK


def _parse_bytes(text: str) -> tuple[bytes, str]:
    """Bytes written as hex or base64, and how they were read.

    ``hex:`` or ``base64:`` (``b64:``) says which; so does ``0x``. Text that reads both ways
    ("AAAAAAEA", "deadbeef") is read the way that starts with a magic byte (0 or 1), as a
    frame or a schema header does; when both or neither do, as hex.
    """
    kind, sep, rest = text.partition(":")
    if sep and kind.lower() in ("hex", "base64", "b64"):
        compact = re.sub(r"\s", "", rest)
        try:
            if kind.lower() == "hex":
                return bytes.fromhex(compact.removeprefix("0x").removeprefix("0X")), "hex"
            return _b64(compact), "base64"
        except ValueError:
            raise SystemExit(f"codec: {rest[:40]!r} is not {kind.lower()}") from None
    compact = re.sub(r"[\s:]", "", text)
    match = _HEX.fullmatch(compact)
    as_hex = bytes.fromhex(match.group(1)) if match else None
    try:
        as_b64 = _b64(compact)
    except ValueError:
        as_b64 = None
    if as_hex is None and as_b64 is None:
        raise SystemExit(f"codec: {text[:40]!r} is neither hex nor base64")
    if as_b64 is None or (match is not None and compact[:2].lower() == "0x"):
        return cast(bytes, as_hex), "hex"
    if as_hex is None:
        return as_b64, "base64"
    if as_b64[:1] in (b"\x00", b"\x01") and as_hex[:1] not in (b"\x00", b"\x01"):
        return as_b64, "base64 (it reads as hex too; write hex: to read it so)"
    return as_hex, "hex (it reads as base64 too; write base64: to read it so)"


def _describe_frame(frame: Frame, value: bytes, out: TextIO) -> None:
    kind = "schema id" if frame.magic == 0 else "schema GUID"
    out.write(f"framing:          {frame.source}\n")
    out.write(f"magic:            0x{frame.magic:02x} ({kind})\n")
    if frame.schema_id is not None:
        out.write(f"schema id:        {frame.schema_id}\n")
    else:
        out.write(f"schema guid:      {frame.schema_guid}\n")
    out.write(f"message indexes:  {list(frame.message_indexes)}\n")
    size = len(value) - frame.payload_offset
    out.write(f"payload:          {size} bytes at offset {frame.payload_offset}\n")


def run_inspect(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """The `inspect` command."""
    value, read_as = _parse_bytes("".join(args.value))
    headers: list[tuple[str, bytes | None]] = []
    for item in args.header:
        key, sep, raw = item.partition("=")
        if not sep:
            raise SystemExit("codec: --header takes KEY=HEX_OR_BASE64")
        headers.append((key, _parse_bytes(raw)[0] if raw else None))
    stdout.write(f"input:            {read_as}\n")
    stdout.write(
        f"value:            {len(value)} bytes: {value[:32].hex(' ')}"
        f"{' ...' if len(value) > 32 else ''}\n"
    )
    try:
        frame = parse_frame(value, headers, is_key=args.key)
    except CodecError as exc:
        stdout.write(f"error:            {exc.code}: {exc.message}\n")
        return EXIT_RECORD_ERROR
    _describe_frame(frame, value, stdout)
    if not args.registry_url:
        stdout.write("resolved type:    (no registry: give --registry-url to decode)\n")
        return EXIT_OK
    registry = _open(args)
    try:
        record = Decoder(registry, allow_unknown_fields=args.allow_unknown_fields).decode(
            value, headers, is_key=args.key
        )
    except RegistryUnavailable as exc:
        stderr.write(f"codec: {exc.summary}: {exc.message}\n")
        return EXIT_REGISTRY_UNAVAILABLE
    except CodecError as exc:
        if exc.message_type:
            stdout.write(f"resolved type:    {exc.message_type}\n")
        stdout.write(f"error:            {exc.code}: {exc.message}\n")
        return EXIT_RECORD_ERROR
    finally:
        registry.close()
    stdout.write(f"resolved type:    {record.message_type}\n")
    if record.has_unknown_fields:
        stdout.write("unknown fields:   yes (kept)\n")
    try:
        rendered = json.dumps(message_to_json(record.message), indent=2)
    except CodecError as exc:
        stdout.write(f"error:            {exc.code}: {exc.message}\n")
        return EXIT_RECORD_ERROR
    stdout.write("message:\n" + rendered + "\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `python -m codec`."""
    parser = argparse.ArgumentParser(
        prog="python -m codec", description="Decode Confluent-framed Protobuf records."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def registry_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--registry-url",
            default=os.environ.get("PROTOLAKE_REGISTRY_URL"),
            help="schema registry URL, or dir:/path (default $PROTOLAKE_REGISTRY_URL)",
        )
        sub.add_argument(
            "--registry-user",
            metavar="USER:PASS",
            help="basic auth (default $PROTOLAKE_REGISTRY_USER, for an http(s) URL)",
        )
        sub.add_argument(
            "--allow-unknown-fields",
            action="store_true",
            help="decode records carrying fields the writer schema does not define",
        )
        sub.add_argument("--key", action="store_true", help="the bytes are a record key")

    decode = commands.add_parser("decode", help="JSON lines of records in, JSON lines out")
    registry_options(decode)
    inspect = commands.add_parser("inspect", help="show the framing of one record")
    inspect.add_argument(
        "value", nargs="+", help="the record value, hex or base64 (or hex:... , base64:...)"
    )
    inspect.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a record header, value in hex or base64 (empty: null); repeatable",
    )
    registry_options(inspect)
    return parser


def main(
    argv: Sequence[str] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the command line; return the exit status."""
    args = build_parser().parse_args(argv)
    # Bytes that are not UTF-8 must not stop the reading: each such line gets its BAD_INPUT.
    # Lines end at "\n" only: a lone "\r" is whitespace inside a JSON line, not a line end.
    stdin = stdin or io.TextIOWrapper(
        sys.stdin.buffer, encoding="utf-8", errors="surrogateescape", newline="\n"
    )
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    if args.command == "decode":
        return run_decode(args, stdin, stdout, stderr)
    return run_inspect(args, stdout, stderr)
