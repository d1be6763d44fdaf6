"""Schema resolution: references, builtins, text vs serialized, failures, caches, classes."""

from __future__ import annotations

import base64
import subprocess
import sys
import textwrap

import pytest
from google.protobuf import descriptor_pb2

from codec import (
    NotProtobuf,
    RegisteredSchema,
    SchemaInvalid,
    SchemaKey,
    SchemaReference,
    SchemaResolver,
    UnknownMessage,
    message_class_for,
)
from codec.descriptors import ResolvedSchema
from codec.protoc import builtin_file_descriptor_set, is_builtin, run_protoc
from tests.support.codec_test_support import MemoryRegistry

COMMON = 'syntax = "proto3";\npackage dsc.shop;\nmessage Money { string currency = 1; int64 units = 2; }\n'
ADDRESS = (
    'syntax = "proto3";\npackage dsc.shop;\nimport "shop/common.proto";\n'
    "message Address { string city = 1; Money fee = 2; }\n"
)
ORDER = textwrap.dedent(
    """\
    syntax = "proto3";
    package dsc.shop;
    import "shop/common.proto";
    import "shop/address.proto";
    import "google/protobuf/timestamp.proto";
    message Order {
      string id = 1;
      Money total = 2;
      Address ship_to = 3;
      google.protobuf.Timestamp at = 4;
      message Line { string sku = 1; }
      repeated Line lines = 5;
    }
    """
)


def text(schema, refs=(), schema_type="PROTOBUF"):
    return RegisteredSchema(schema=schema, schema_type=schema_type, references=tuple(refs))


def serialized(schema_text, name, refs=()):
    """Compile text to a base64 FileDescriptorProto, as a registry's format=serialized does."""
    fds = descriptor_pb2.FileDescriptorSet.FromString(run_protoc({name: schema_text}, [name]))
    proto = next(f for f in fds.file if f.name == name)
    return RegisteredSchema(
        schema=base64.b64encode(proto.SerializeToString()).decode(),
        references=tuple(refs),
        format="serialized",
    )


COMMON_REF = SchemaReference("shop/common.proto", "shop/common.proto", 1)
ADDRESS_REF = SchemaReference("shop/address.proto", "addresses", 3)


def shop_registry(as_serialized=False):
    reg = MemoryRegistry()
    make = (
        (lambda t, n, r=(): serialized(t, n, r))
        if as_serialized
        else (lambda t, n, r=(): text(t, r))
    )
    if as_serialized:
        # serialized files need their imports at compile time of the fixture only
        common = serialized(COMMON, "shop/common.proto")
        fds = run_protoc(
            {"shop/common.proto": COMMON, "shop/address.proto": ADDRESS}, ["shop/address.proto"]
        )
        address_proto = next(
            f
            for f in descriptor_pb2.FileDescriptorSet.FromString(fds).file
            if f.name == "shop/address.proto"
        )
        address = RegisteredSchema(
            schema=base64.b64encode(address_proto.SerializeToString()).decode(),
            references=(COMMON_REF,),
            format="serialized",
        )
        reg.add_version("shop/common.proto", 1, common)
        reg.add_version("addresses", 3, address)
    else:
        reg.add_version("shop/common.proto", 1, make(COMMON, "shop/common.proto"))
        reg.add_version("addresses", 3, text(ADDRESS, [COMMON_REF]))
    reg.add(7, text(ORDER, [COMMON_REF, ADDRESS_REF]), guid="0f8fad5b-d9cb-469f-a165-70867728950e")
    return reg


@pytest.mark.parametrize("as_serialized", [False, True], ids=["text-refs", "serialized-refs"])
def test_text_schema_with_nested_references(as_serialized):
    reg = shop_registry(as_serialized)
    resolved = SchemaResolver(reg).resolve_id(7)
    assert resolved.message_types == ("dsc.shop.Order", "dsc.shop.Order.Line")
    assert resolved.message_type_for([0, 0]) == "dsc.shop.Order.Line"
    names = [
        f.name
        for f in descriptor_pb2.FileDescriptorSet.FromString(resolved.file_descriptor_set).file
    ]
    assert set(names) == {
        "shop/common.proto",
        "shop/address.proto",
        "google/protobuf/timestamp.proto",
        resolved.root_file,
    }
    assert names[-1] == resolved.root_file == "protolake/schema-7.proto"
    # shop/common.proto is imported twice but fetched once.
    assert [c for c in reg.calls if c[0] == "subject"] == [
        ("subject", ("shop/common.proto", 1)),
        ("subject", ("addresses", 3)),
    ]
    cls = message_class_for(resolved.file_descriptor_set, "dsc.shop.Order")
    msg = cls()
    msg.ship_to.fee.units = 5
    msg.at.seconds = 3
    assert cls.FromString(msg.SerializeToString()).ship_to.fee.units == 5


@pytest.mark.parametrize(
    "formats",
    [
        ("serialized", "text", "text"),
        ("text", "serialized", "text"),
        ("serialized", "text", "serialized"),
    ],
    ids=["serialized-root-text-refs", "text-serialized-text", "serialized-text-serialized"],
)
def test_mixed_formats_in_one_reference_chain(formats):
    # A registry may answer some files serialized and others as text; imports cross both ways.
    root_format, address_format, common_format = formats
    compiled = {
        f.name: f
        for f in descriptor_pb2.FileDescriptorSet.FromString(
            run_protoc(
                {"shop/common.proto": COMMON, "shop/address.proto": ADDRESS, "root.proto": ORDER},
                ["root.proto"],
            )
        ).file
    }

    def as_format(fmt, schema_text, name, refs):
        if fmt == "text":
            return text(schema_text, refs)
        raw = base64.b64encode(compiled[name].SerializeToString()).decode()
        return RegisteredSchema(schema=raw, references=tuple(refs), format="serialized")

    reg = MemoryRegistry()
    reg.add_version(
        "shop/common.proto", 1, as_format(common_format, COMMON, "shop/common.proto", ())
    )
    reg.add_version(
        "addresses", 3, as_format(address_format, ADDRESS, "shop/address.proto", [COMMON_REF])
    )
    reg.add(9, as_format(root_format, ORDER, "root.proto", [COMMON_REF, ADDRESS_REF]))
    resolved = SchemaResolver(reg).resolve_id(9)
    assert resolved.message_types == ("dsc.shop.Order", "dsc.shop.Order.Line")
    cls = message_class_for(resolved.file_descriptor_set, "dsc.shop.Order")
    msg = cls(id="o")
    msg.ship_to.fee.units = 7
    assert cls.FromString(msg.SerializeToString()).ship_to.fee.units == 7


def test_all_serialized_schema_gets_builtin_imports():
    reg = MemoryRegistry()
    root = serialized(
        'syntax = "proto3"; package dsc.ser; import "google/type/money.proto";'
        "message P { google.type.Money price = 1; }",
        "whatever.proto",
    )
    reg.add(1, root)
    resolved = SchemaResolver(reg).resolve_id(1)
    names = [
        f.name
        for f in descriptor_pb2.FileDescriptorSet.FromString(resolved.file_descriptor_set).file
    ]
    assert names == ["google/type/money.proto", "protolake/schema-1.proto"]
    cls = message_class_for(resolved.file_descriptor_set, "dsc.ser.P")
    assert cls(price={"currency_code": "EUR", "units": 3}).price.units == 3


def test_builtins_resolve_unregistered_including_confluent_files():
    reg = MemoryRegistry()
    reg.add(
        2,
        text(
            textwrap.dedent(
                """\
        syntax = "proto3";
        package dsc.wkt;
        import "confluent/meta.proto";
        import "confluent/type/decimal.proto";
        import "google/type/date.proto";
        import "google/type/latlng.proto";
        import "google/protobuf/struct.proto";
        message Invoice {
          option (confluent.message_meta) = { doc: "an invoice", tags: ["PII"] };
          confluent.type.Decimal amount = 1 [(confluent.field_meta).params = { key: "precision" value: "9" }];
          google.type.Date due = 2;
          google.type.LatLng where = 3;
          google.protobuf.Struct extra = 4;
        }
        """
            )
        ),
    )
    resolved = SchemaResolver(reg).resolve_id(2)
    cls = message_class_for(resolved.file_descriptor_set, "dsc.wkt.Invoice")
    msg = cls()
    msg.amount.value = b"\x04\xd2"
    msg.amount.scale = 2
    msg.due.year = 2026
    assert cls.FromString(msg.SerializeToString()).amount.scale == 2
    assert reg.calls == [("id", 2)]
    for name in (
        "confluent/meta.proto",
        "confluent/type/decimal.proto",
        "google/type/date.proto",
        "google/protobuf/any.proto",
    ):
        assert is_builtin(name)
    assert not is_builtin("shop/common.proto")


def _shape(proto):
    """Messages, fields (name, number, type, label, type name) and extensions of a file."""

    def msg(m):
        return (
            m.name,
            [(f.name, f.number, f.type, f.label, f.type_name) for f in m.field],
            [msg(n) for n in m.nested_type],
            m.options.map_entry,
        )

    return (
        proto.name,
        proto.package,
        list(proto.dependency),
        [msg(m) for m in proto.message_type],
        [(e.name, e.number, e.extendee, e.type_name) for e in proto.extension],
    )


def test_shipped_confluent_files_match_confluent_kafkas_descriptors():
    from confluent_kafka.schema_registry.confluent import meta_pb2
    from confluent_kafka.schema_registry.confluent.type import decimal_pb2

    ours = {f.name: f for f in builtin_file_descriptor_set().file}
    for module in (meta_pb2, decimal_pb2):
        theirs = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
        assert _shape(ours[theirs.name]) == _shape(theirs)


def test_avro_schema_is_not_protobuf_and_is_cached():
    reg = MemoryRegistry()
    reg.add(3, text('{"type": "string"}', schema_type="AVRO"))
    resolver = SchemaResolver(reg)
    for _ in range(3):
        with pytest.raises(NotProtobuf) as info:
            resolver.resolve_id(3)
    assert info.value.code == "NOT_PROTOBUF"
    assert info.value.schema_id == 3
    assert reg.calls == [("id", 3)]


def test_schema_that_does_not_compile_is_schema_invalid_with_protoc_diagnostics():
    reg = MemoryRegistry()
    reg.add(4, text('syntax = "proto3";\npackage dsc.bad;\nmessage A { Missing m = 1; }\n'))
    resolver = SchemaResolver(reg)
    with pytest.raises(SchemaInvalid) as info:
        resolver.resolve_id(4)
    assert "protolake/schema-4.proto:3" in info.value.message
    assert '"Missing" is not defined' in info.value.message
    assert "/tmp" not in info.value.message and "protolake-protoc-" not in info.value.message
    with pytest.raises(SchemaInvalid):
        resolver.resolve_id(4)
    assert reg.calls == [("id", 4)]  # not recompiled per record


def test_reference_problems_are_schema_invalid():
    reg = MemoryRegistry()
    a = SchemaReference("a.proto", "a", 1)
    b = SchemaReference("b.proto", "b", 1)
    reg.add_version("a", 1, text('syntax = "proto3"; import "b.proto"; message A {}', [b]))
    reg.add_version("b", 1, text('syntax = "proto3"; import "a.proto"; message B {}', [a]))
    reg.add(10, text('syntax = "proto3"; import "a.proto"; message R {}', [a]))
    with pytest.raises(SchemaInvalid, match="cycle: a.proto -> b.proto -> a.proto"):
        SchemaResolver(reg).resolve_id(10)

    reg.add(
        11,
        text(
            'syntax = "proto3"; import "gone.proto"; message R {}',
            [SchemaReference("gone.proto", "gone", 2)],
        ),
    )
    with pytest.raises(SchemaInvalid, match="'gone.proto'.*not in the registry") as info:
        SchemaResolver(reg).resolve_id(11)
    assert info.value.registry_error_code == 40402

    reg.add_version("avro", 1, text("{}", schema_type="AVRO"))
    reg.add(12, text('syntax = "proto3"; message R {}', [SchemaReference("x.proto", "avro", 1)]))
    with pytest.raises(SchemaInvalid, match="AVRO schema, not PROTOBUF"):
        SchemaResolver(reg).resolve_id(12)

    reg.add(
        13, text('syntax = "proto3"; message R {}', [SchemaReference("../../etc/x.proto", "a", 1)])
    )
    with pytest.raises(SchemaInvalid, match="not a relative file path"):
        SchemaResolver(reg).resolve_id(13)

    reg.add(
        14,
        serialized(
            'syntax = "proto3"; import "google/protobuf/empty.proto"; message R {}', "r.proto"
        ),
    )
    proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(reg.by_id[14].schema))
    proto.dependency.append("nowhere.proto")
    reg.add(
        15,
        RegisteredSchema(base64.b64encode(proto.SerializeToString()).decode(), format="serialized"),
    )
    with pytest.raises(SchemaInvalid, match="imports 'nowhere.proto', which no reference provides"):
        SchemaResolver(reg).resolve_id(15)

    reg.add(16, RegisteredSchema("not base64 at all!", format="serialized"))
    with pytest.raises(SchemaInvalid, match="not a FileDescriptorProto"):
        SchemaResolver(reg).resolve_id(16)


def test_guid_resolution_and_unknown_schema_is_not_cached_by_the_resolver():
    reg = shop_registry()
    resolver = SchemaResolver(reg)
    resolved = resolver.resolve_guid("0F8FAD5B-D9CB-469F-A165-70867728950E")
    assert resolved.schema_guid == "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert resolved.root_file == "protolake/schema-0f8fad5b-d9cb-469f-a165-70867728950e.proto"
    from codec import UnknownSchema

    for _ in range(2):
        with pytest.raises(UnknownSchema):
            resolver.resolve_id(999)
    # A 404 may turn into a schema later: the registry client (not the resolver) decides
    # how long to remember it.
    assert reg.calls.count(("id", 999)) == 2


def test_a_missing_reference_is_asked_again_and_resolves_once_registered():
    reg = MemoryRegistry()
    gone = SchemaReference("gone.proto", "gone", 2)
    reg.add(11, text('syntax = "proto3"; import "gone.proto"; message R { G g = 1; }', [gone]))
    resolver = SchemaResolver(reg)
    with pytest.raises(SchemaInvalid, match="'gone.proto'.*not in the registry"):
        resolver.resolve_id(11)
    reg.add_version("gone", 2, text('syntax = "proto3"; message G { int32 x = 1; }'))
    resolved = resolver.resolve_id(11)  # not remembered as invalid: the schema resolves now
    assert resolved.message_type_for([0]) == "R"
    assert reg.calls.count(("subject", ("gone", 2))) == 2


def test_resolve_key_by_id_and_by_guid_names_the_message_type():
    reg = shop_registry()
    resolver = SchemaResolver(reg)
    by_id, name = resolver.resolve_key(SchemaKey(7, None, (0,)))
    assert by_id.schema_id == 7 and name == by_id.message_type_for((0,))
    guid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    by_guid, guid_name = resolver.resolve_key(SchemaKey(None, guid, (0,)))
    assert by_guid.schema_guid == guid and guid_name == by_guid.message_type_for((0,))
    with pytest.raises(UnknownMessage) as err:
        resolver.resolve_key(SchemaKey(7, None, (99,)))
    assert err.value.schema_id == 7 and err.value.message_indexes == (99,)
    assert reg.calls.count(("id", 7)) == 1  # resolved once, cached by id


def test_resolver_cache_is_bounded():
    reg = MemoryRegistry()
    for i in range(5):
        reg.add(i, text(f'syntax = "proto3"; package dsc.b{i}; message M {{}}'))
    resolver = SchemaResolver(reg, cache_size=2)
    for i in range(5):
        resolver.resolve_id(i)
    resolver.resolve_id(4)
    resolver.resolve_id(0)
    assert reg.calls.count(("id", 4)) == 1
    assert reg.calls.count(("id", 0)) == 2  # evicted, fetched again


def test_message_class_for_is_cached_by_bytes_and_checks_names():
    resolved = SchemaResolver(shop_registry()).resolve_id(7)
    fds = resolved.file_descriptor_set
    copy = bytes(bytearray(fds))
    assert copy is not fds
    assert message_class_for(fds, "dsc.shop.Order") is message_class_for(copy, "dsc.shop.Order")
    with pytest.raises(UnknownMessage, match="dsc.shop.Nope"):
        message_class_for(fds, "dsc.shop.Nope")
    with pytest.raises(SchemaInvalid):
        message_class_for(b"\xff\xff\xff", "x.Y")
    rebuilt = ResolvedSchema.from_file_descriptor_set(fds, resolved.root_file, schema_id=7)
    assert rebuilt.message_type_for((0,)) == "dsc.shop.Order"
    with pytest.raises(UnknownMessage) as info:
        rebuilt.message_type_for((3,))
    assert info.value.code == "UNKNOWN_MESSAGE" and info.value.message_indexes == (3,)


def test_message_class_for_works_in_a_fresh_process_from_bytes_only(tmp_path):
    resolved = SchemaResolver(shop_registry()).resolve_id(7)
    cls = message_class_for(resolved.file_descriptor_set, "dsc.shop.Order")
    msg = cls(id="o-1")
    msg.ship_to.city = "Lyon"
    (tmp_path / "fds.bin").write_bytes(resolved.file_descriptor_set)
    (tmp_path / "payload.bin").write_bytes(msg.SerializeToString())
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from codec import message_class_for, decode_payload
        fds = Path({str(tmp_path / "fds.bin")!r}).read_bytes()
        cls = message_class_for(fds, "dsc.shop.Order")
        msg = decode_payload(cls, Path({str(tmp_path / "payload.bin")!r}).read_bytes())
        print(msg.id, msg.ship_to.city, "grpc_tools" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["o-1", "Lyon", "False"]  # no protoc needed on an executor


# -- the schema compiler's environment ----------------------------------------------------

MONEY_USER = (
    'syntax = "proto3";\npackage dsc.zip;\nimport "google/type/money.proto";\n'
    'import "confluent/meta.proto";\n'
    'message Priced { google.type.Money price = 1 [(confluent.field_meta).doc = "p"]; }\n'
)


def test_shipped_protos_compile_when_codec_is_imported_from_a_zip(tmp_path):
    """spark-submit --py-files puts a zip of the packages first on the path; protoc needs
    the shipped .proto files (google/type, confluent) as a real folder all the same."""
    import zipfile
    from pathlib import Path

    import codec

    package = Path(codec.__file__).parent
    archive = tmp_path / "protolake.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, f"codec/{path.relative_to(package).as_posix()}")
    script = textwrap.dedent(
        f"""
        import codec
        from codec import SchemaResolver, RegisteredSchema
        from codec.protoc import builtin_file_names, shipped_proto_dir

        class One:
            def get_schema_by_id(self, schema_id):
                return RegisteredSchema(schema={MONEY_USER!r})

        print(codec.__file__)
        print(shipped_proto_dir())
        print("google/type/money.proto" in builtin_file_names())
        resolved = SchemaResolver(One()).resolve_id(1)
        print(" ".join(resolved.message_class_for([0]).DESCRIPTOR.fields_by_name))
        """
    )
    env = {**__import__("os").environ, "PYTHONPATH": str(archive)}
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    imported_from, folder, has_money, fields = out.stdout.splitlines()
    assert imported_from.startswith(str(archive))  # the scenario is real: codec came from the zip
    assert not folder.startswith(str(archive))
    assert has_money == "True"
    assert fields == "price"
    assert not Path(folder).exists()  # the private copy is removed at exit


def _schema_with_text(schema_id, body):
    reg = MemoryRegistry()
    reg.add(schema_id, text(f'syntax = "proto3";\npackage dsc.env{schema_id};\n{body}'))
    return reg


def test_protoc_out_of_time_fails_the_batch_and_is_not_remembered(monkeypatch):
    from codec import (
        Decoder,
        RegistryUnavailable,
        SchemaCompilerUnavailable,
        protoc,
        write_frame,
    )

    reg = _schema_with_text(21, "message A { string s = 1; }\n")
    resolver = SchemaResolver(reg)
    monkeypatch.setattr(protoc, "PROTOC_TIMEOUT_SECONDS", 0.001)
    with pytest.raises(SchemaCompilerUnavailable, match="did not finish within") as info:
        resolver.resolve_id(21)
    assert isinstance(info.value, RegistryUnavailable) and not info.value.record_fault
    decoder = Decoder(reg)
    frame = write_frame(21, [0], b"\x0a\x01x")
    with pytest.raises(SchemaCompilerUnavailable):
        decoder.decode(frame)
    monkeypatch.setattr(protoc, "PROTOC_TIMEOUT_SECONDS", 120)
    assert resolver.resolve_id(21).message_type_for([0]) == "dsc.env21.A"
    assert decoder.decode(frame).message.s == "x"


def _python_as(monkeypatch, tmp_path, body):
    """Make ``sys.executable`` (protoc's interpreter) a shell script running ``body``, which
    first adds a line to the returned file: one per run."""
    runs = tmp_path / "runs"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\necho run >> {runs}\n{body}\n")
    python.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(python))
    return runs


def test_protoc_killed_by_a_signal_is_not_the_schemas_fault(monkeypatch, tmp_path):
    from codec import SchemaCompilerUnavailable

    runs = _python_as(monkeypatch, tmp_path, "kill -9 $$")
    with pytest.raises(SchemaCompilerUnavailable, match="killed by signal 9"):
        SchemaResolver(_schema_with_text(22, "message A {}\n")).resolve_id(22)
    assert runs.read_text() == "run\n"  # maybe the out-of-memory killer: not run again


def test_protoc_out_of_time_is_not_run_again(monkeypatch, tmp_path):
    from codec import SchemaCompilerUnavailable, protoc

    runs = _python_as(monkeypatch, tmp_path, "exec sleep 5")
    monkeypatch.setattr(protoc, "PROTOC_TIMEOUT_SECONDS", 0.5)
    with pytest.raises(SchemaCompilerUnavailable, match="did not finish within 0.5 s"):
        SchemaResolver(_schema_with_text(32, "message A {}\n")).resolve_id(32)
    assert runs.read_text() == "run\n"


@pytest.mark.parametrize(
    ("child", "said"),
    [
        # the interpreter dies of the machine (out of file handles) before protoc runs
        (
            f"exec {sys.executable} -c 'raise OSError(24, \"Too many open files\")'",
            "OSError: \\[Errno 24\\] Too many open files",
        ),
        ("exit 3", "exit code 3, no output"),
    ],
    ids=["python-exception", "no-output"],
)
def test_protoc_failing_without_a_word_on_the_files_is_not_the_schemas_fault(
    monkeypatch, tmp_path, child, said
):
    from codec import SchemaCompilerUnavailable, protoc

    reg = _schema_with_text(25, "message A { string s = 1; }\n")
    resolver = SchemaResolver(reg)
    real = sys.executable
    runs = _python_as(monkeypatch, tmp_path, child)
    with pytest.raises(SchemaCompilerUnavailable, match=f"failed before judging the files: {said}"):
        resolver.resolve_id(25)
    assert len(runs.read_text().splitlines()) == protoc.PROTOC_TRIES  # tried again, in vain
    monkeypatch.setattr(sys, "executable", real)
    assert resolver.resolve_id(25).message_type_for([0]) == "dsc.env25.A"  # not remembered


def test_protoc_failing_once_for_the_machine_is_run_again(monkeypatch, tmp_path, caplog):
    from codec import protoc

    failed = tmp_path / "failed-once"
    body = f'if [ ! -e {failed} ]; then touch {failed}; exit 3; fi\nexec {sys.executable} "$@"'
    _python_as(monkeypatch, tmp_path, body)
    resolved = SchemaResolver(_schema_with_text(31, "message A {}\n")).resolve_id(31)
    assert resolved.message_type_for([0]) == "dsc.env31.A"
    [again] = [r.getMessage() for r in caplog.records if r.name == "codec.protoc"]
    assert again == (
        "protoc failed before judging the files: exit code 3, no output; "
        f"running protoc again (2 of {protoc.PROTOC_TRIES})"
    )


def test_protoc_quoting_a_traceback_from_the_schema_is_the_schemas_fault():
    crash = "Traceback (most recent call last):"
    reg = MemoryRegistry()
    reg.add(29, text(f'syntax = "{crash}";\nmessage A {{}}\n'))
    with pytest.raises(SchemaInvalid, match="Unrecognized syntax identifier"):
        SchemaResolver(reg).resolve_id(29)


def test_protoc_output_or_scratch_folder_that_cannot_be_written_is_not_the_schemas_fault(
    monkeypatch, tmp_path
):
    import tempfile

    from codec import SchemaCompilerUnavailable
    from codec.protoc import generate_python

    (tmp_path / "a.proto").write_text('syntax = "proto3";\nmessage A {}\n')
    with pytest.raises(SchemaCompilerUnavailable, match="protoc could not write: .*/gone"):
        generate_python(tmp_path, ["a.proto"], tmp_path / "gone")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-folder"))
    with pytest.raises(SchemaCompilerUnavailable, match="protoc's scratch files: .*No such file"):
        SchemaResolver(_schema_with_text(30, "message A {}\n")).resolve_id(30)


def test_a_full_disk_is_not_the_schemas_fault_a_name_too_long_is(monkeypatch):
    import errno
    from pathlib import Path

    from codec import SchemaCompilerUnavailable

    reg = MemoryRegistry()
    reg.add_version("long", 1, text('syntax = "proto3"; package dsc.long; message L {}'))
    long_name = "x" * 300 + ".proto"  # longer than any file name Linux takes
    reg.add(
        26,
        text(
            'syntax = "proto3"; package dsc.long; message R {}',
            [SchemaReference(long_name, "long", 1)],
        ),
    )
    with pytest.raises(SchemaInvalid, match="cannot be a file name: File name too long"):
        SchemaResolver(reg).resolve_id(26)

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(SchemaCompilerUnavailable, match="could not be written: No space left"):
        SchemaResolver(_schema_with_text(27, "message A {}\n")).resolve_id(27)


def test_a_schema_failing_for_good_is_said_once(caplog):
    reg = MemoryRegistry()
    reg.add(28, text('syntax = "proto3";\npackage dsc.bad28;\nmessage A { Missing m = 1; }\n'))
    resolver = SchemaResolver(reg)
    for _ in range(3):
        with pytest.raises(SchemaInvalid):
            resolver.resolve_id(28)
    said = [r for r in caplog.records if r.name == "codec.descriptors"]
    assert len(said) == 1 and said[0].levelname == "WARNING"
    assert "schema 28 is SCHEMA_INVALID for good (schema)" in said[0].getMessage()
    assert '"Missing" is not defined' in said[0].getMessage()


def test_missing_grpc_tools_is_not_the_schemas_fault(monkeypatch):
    import importlib.util

    from codec import SchemaCompilerUnavailable, protoc

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "grpc_tools" else real(name, *a),
    )
    protoc.grpc_tools_include_dir.cache_clear()
    try:
        with pytest.raises(SchemaCompilerUnavailable, match="grpcio-tools"):
            SchemaResolver(_schema_with_text(23, "message A {}\n")).resolve_id(23)
    finally:
        monkeypatch.undo()
        protoc.grpc_tools_include_dir.cache_clear()


@pytest.mark.parametrize(
    ("names", "clash"),
    [
        (["shop", "shop/c.proto"], "'shop/c.proto' and 'shop'"),
        (["protolake"], "'protolake/schema-24.proto' and 'protolake'"),  # the root's folder
    ],
)
def test_reference_names_that_clash_as_folders_are_schema_invalid(names, clash):
    from codec import Decoder, write_frame

    reg = MemoryRegistry()
    refs = []
    for i, name in enumerate(names):
        reg.add_version(
            f"s{i}", 1, text(f'syntax = "proto3"; package dsc.clash; message C{i} {{}}')
        )
        refs.append(SchemaReference(name, f"s{i}", 1))
    reg.add(24, text('syntax = "proto3"; package dsc.clash; message R {}', refs))
    with pytest.raises(SchemaInvalid, match=f"file names clash: {clash}"):
        SchemaResolver(reg).resolve_id(24)
    with pytest.raises(SchemaInvalid) as info:
        Decoder(reg).decode(write_frame(24, [0], b""))
    assert info.value.record_fault  # the record's fault: quarantined, no batch failure
