"""The folder-backed registry: index, derived references, errors, open_registry."""

from __future__ import annotations

import json

import pytest

from codec import (
    Decoder,
    DirectorySchemaRegistry,
    HttpSchemaRegistry,
    SchemaInvalid,
    UnknownSchema,
    open_registry,
    write_frame,
)

GUID = "6f1c9bd2-3c1e-4b1a-9a53-0d5b7b2f6c11"


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop/common.proto").write_text(
        'syntax = "proto3";\npackage dir.shop;\nimport "google/type/money.proto";\n'
        "message Price { google.type.Money amount = 1; }\n"
    )
    (tmp_path / "shop/order.proto").write_text(
        'syntax = "proto3";\npackage dir.shop;\nimport "shop/common.proto";\n'
        'import "google/protobuf/timestamp.proto";\n'
        "message Order { string id = 1; Price price = 2; google.protobuf.Timestamp at = 3; }\n"
    )
    (tmp_path / "broken.proto").write_text('syntax = "proto3"; message B { Nope x = 1; }')
    index = {
        "schemas": [
            {"id": 1, "guid": GUID.upper(), "subject": "orders-value", "file": "shop/order.proto"},
            {"id": 2, "subject": "common", "version": 4, "file": "shop/common.proto"},
            {"id": 3, "file": "broken.proto"},
            {
                "id": 4,
                "file": "shop/order.proto",
                "subject": "explicit",
                "references": [{"name": "shop/common.proto", "subject": "shop/common.proto"}],
            },
        ]
    }
    (tmp_path / "index.json").write_text(json.dumps(index))
    return tmp_path


def test_references_derived_from_imports(folder):
    reg = DirectorySchemaRegistry(folder)
    order = reg.get_schema_by_id(1)
    assert order.schema_type == "PROTOBUF" and order.format == "text"
    assert order.subject == "orders-value" and order.version == 1 and order.schema_guid == GUID
    # shop/common.proto has an index entry (subject "common", version 4); builtins are skipped.
    assert [(r.name, r.subject, r.version) for r in order.references] == [
        ("shop/common.proto", "common", 4)
    ]
    assert reg.get_version("common", 4).schema == (folder / "shop/common.proto").read_text()
    # Any file is reachable as subject = its path, version 1.
    assert reg.get_version("shop/common.proto", 1).references == ()
    explicit = reg.get_schema_by_id(4)
    assert [(r.subject, r.version) for r in explicit.references] == [("shop/common.proto", 1)]


def test_decode_through_a_folder(folder):
    reg = open_registry(f"dir:{folder}")
    assert isinstance(reg, DirectorySchemaRegistry)
    decoder = Decoder(reg)
    cls = decoder.resolver.resolve_id(1).message_class_for((0,))
    msg = cls(id="o-9")
    msg.price.amount.currency_code = "EUR"
    for value, headers in [
        (write_frame(1, [0], msg.SerializeToString()), None),
        (write_frame(GUID, [0], msg.SerializeToString()), None),
        (msg.SerializeToString(), [("__value_schema_id", write_frame(GUID, [0]))]),
        (write_frame(4, [0], msg.SerializeToString()), None),
    ]:
        record = decoder.decode(value, headers)
        assert record.message_type == "dir.shop.Order"
        assert record.to_json() == {"id": "o-9", "price": {"amount": {"currency_code": "EUR"}}}


def test_errors(folder):
    reg = DirectorySchemaRegistry(folder)
    with pytest.raises(UnknownSchema) as info:
        reg.get_schema_by_id(99)
    assert info.value.registry_error_code == 40403
    with pytest.raises(UnknownSchema) as info:
        reg.get_schema_by_guid("00000000-0000-0000-0000-000000000000")
    assert info.value.registry_error_code == 40403
    with pytest.raises(UnknownSchema) as info:
        reg.get_version("nope", 1)
    assert info.value.registry_error_code == 40401
    with pytest.raises(UnknownSchema) as info:
        reg.get_version("common", 5)
    assert info.value.registry_error_code == 40402
    with pytest.raises(UnknownSchema):
        reg.get_version("../../etc/passwd", 1)  # never outside the folder
    with pytest.raises(SchemaInvalid, match="Nope"):
        Decoder(reg).decode(write_frame(3, [0], b""))


def test_bad_index_files(tmp_path):
    (tmp_path / "a.proto").write_text('syntax = "proto3"; message A {}')
    (tmp_path / "index.json").write_text(
        json.dumps({"schemas": [{"id": 1, "file": "a.proto"}, {"id": 1, "file": "a.proto"}]})
    )
    with pytest.raises(ValueError, match="schema id 1 appears twice"):
        DirectorySchemaRegistry(tmp_path)
    (tmp_path / "index.json").write_text(json.dumps({"schemas": [{"id": 1}]}))
    with pytest.raises(ValueError, match="needs a 'file'"):
        DirectorySchemaRegistry(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        DirectorySchemaRegistry(tmp_path / "missing")


@pytest.mark.parametrize(
    ("index", "why"),
    [
        ([], "must be an object"),
        ({"schemas": "a.proto"}, "must be an object"),
        ({"schemas": [{"id": "1", "file": "a.proto"}]}, "schema id '1' is not an integer"),
        ({"schemas": [{"id": True, "file": "a.proto"}]}, "is not an integer"),
        ({"schemas": [{"id": 2**32, "file": "a.proto"}]}, "is not an integer"),
        ({"schemas": [{"guid": "not-a-guid", "file": "a.proto"}]}, "is not a GUID"),
        ({"schemas": [{"id": 1, "file": "missing.proto"}]}, "not a file in the folder"),
        ({"schemas": [{"id": 1, "file": "../a.proto"}]}, "must be a path inside the folder"),
        ({"schemas": [{"id": 1, "file": "/etc/hosts"}]}, "must be a path inside the folder"),
        ({"schemas": [{"id": 1, "file": "a.proto", "version": "2"}]}, "not a positive integer"),
        ({"schemas": [{"id": 1, "file": "a.proto", "references": "b"}]}, "must be a list"),
        ({"schemas": [{"id": 1, "file": "a.proto", "references": [{"subject": "b"}]}]}, "name"),
        (
            {
                "schemas": [
                    {"guid": GUID, "file": "a.proto"},
                    {"guid": GUID.upper(), "file": "a.proto"},
                ]
            },
            "appears twice",
        ),
    ],
)
def test_a_mistake_in_the_index_is_refused_when_the_registry_opens(tmp_path, index, why):
    (tmp_path / "a.proto").write_text('syntax = "proto3"; message A {}')
    (tmp_path / "index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match=why):
        DirectorySchemaRegistry(tmp_path)
    (tmp_path / "index.json").write_bytes(b"{\xff")
    with pytest.raises(ValueError, match="is not JSON"):
        DirectorySchemaRegistry(tmp_path)


def test_index_forms_that_mean_the_same_are_found(tmp_path):
    (tmp_path / "a.proto").write_text(
        'syntax = "proto3"; package dirnorm; message A { string s = 1; }'
    )
    guid = GUID.replace("-", "").upper()  # any form uuid reads
    (tmp_path / "index.json").write_text(
        json.dumps({"schemas": [{"id": 7, "guid": guid, "file": "./a.proto"}]})
    )
    decoder = Decoder(DirectorySchemaRegistry(tmp_path))
    assert decoder.decode(write_frame(GUID, [0], b"\x0a\x01g")).message.s == "g"
    assert decoder.decode(write_frame(7, [0], b"\x0a\x01i")).message.s == "i"


def test_schema_files_that_are_not_utf8_or_gone_are_codec_errors(tmp_path):
    from codec import RegistryUnavailable

    (tmp_path / "a.proto").write_bytes(b'syntax = "proto3"; package dirutf; message A {} // \xff')
    (tmp_path / "b.proto").write_text(
        'syntax = "proto3"; package dirutf; import "c.proto"; message B { C c = 1; }'
    )
    (tmp_path / "c.proto").write_bytes(b'syntax = "proto3"; package dirutf; message C {} // \xfe')
    (tmp_path / "d.proto").write_text('syntax = "proto3"; package dirutf; message D {}')
    (tmp_path / "index.json").write_text(
        json.dumps(
            {
                "schemas": [
                    {"id": 1, "file": "a.proto"},
                    {"id": 2, "file": "b.proto"},
                    {"id": 4, "file": "d.proto"},
                ]
            }
        )
    )
    decoder = Decoder(DirectorySchemaRegistry(tmp_path))
    with pytest.raises(SchemaInvalid, match="'a.proto' is not UTF-8"):
        decoder.decode(write_frame(1, [0], b""))
    with pytest.raises(SchemaInvalid, match=r"c.proto.*not read, not UTF-8: a.proto, c.proto"):
        decoder.decode(write_frame(2, [0], b""))
    (tmp_path / "d.proto").unlink()  # gone since the index was read: the registry's fault
    with pytest.raises(RegistryUnavailable, match="'d.proto'.*cannot be read"):
        decoder.decode(write_frame(4, [0], b""))


def test_open_registry_picks_the_implementation(folder):
    assert isinstance(open_registry(folder), DirectorySchemaRegistry)
    assert isinstance(open_registry(str(folder)), DirectorySchemaRegistry)
    http = open_registry("https://user:pa55word@registry.example:8443/sr/", read_timeout=3)
    assert isinstance(http, HttpSchemaRegistry)
    assert http.url == "https://registry.example:8443/sr"
    assert "pa55word" not in repr(http) and "user" not in repr(http)
    with pytest.raises(ValueError, match="registry must be"):
        open_registry("ftp://user:secret@host/")
    with pytest.raises(ValueError) as info:
        open_registry("kafka://user:secret@host/")
    assert "secret" not in str(info.value)
    with pytest.raises(ValueError, match="takes no options"):
        open_registry(f"dir:{folder}", basic_auth="a:b")
