"""Every path of the lakehouse from its root: local folders, URIs, trailing slashes, bad names."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse.layout import Layout, has_scheme, local_path, table_name


def test_a_folder_has_one_local_path_however_it_is_spelled(tmp_path: Path) -> None:
    """Symbolic links and ``..`` resolve to the same path (the checkpoint lock of one folder
    has one key); the rest of a ``file:`` URI is a name, as Spark's file system reads it."""
    real = tmp_path / "lake house"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    spellings = [
        str(real),
        f"{tmp_path}/link",
        f"{real}/../lake house",
        f"file://{tmp_path}/lake house",
        f"file://localhost{tmp_path}/link",
        f"file:{tmp_path}/link",
    ]
    assert {local_path(s) for s in spellings} == {real.resolve()}
    assert local_path(f"file://{tmp_path}/lake%20house") == tmp_path.resolve() / "lake%20house"
    assert local_path(f"file://{tmp_path}/lake#1") == tmp_path.resolve() / "lake#1"
    assert not Layout("file://elsewhere/lh").is_local and Layout("file:///lh").is_local


def test_every_path_of_a_local_root() -> None:
    lh = Layout("/data/lh")
    assert lh.root == "/data/lh"
    assert lh.bronze == "/data/lh/bronze"
    assert lh.silver == "/data/lh/silver"
    assert lh.bronze_table("shop_orders") == "/data/lh/bronze/shop_orders"
    assert lh.silver_table("shop_v1_order_1a2b") == "/data/lh/silver/shop_v1_order_1a2b"
    assert lh.quarantine == "/data/lh/quarantine/records"
    assert lh.quality_results == "/data/lh/quality/results"
    assert lh.checkpoints == "/data/lh/_checkpoints"
    assert lh.checkpoint("bronze", "per_topic") == "/data/lh/_checkpoints/bronze/per_topic"
    assert lh.checkpoint("silver", "shop_orders") == "/data/lh/_checkpoints/silver/shop_orders"
    assert (
        Layout.app_id_file(lh.checkpoint("silver", "t"))
        == "/data/lh/_checkpoints/silver/t/_protolake_app_id"
    )
    assert [lh.layer(n) for n in ("bronze", "silver", "quarantine", "quality")] == [
        "/data/lh/bronze",
        "/data/lh/silver",
        "/data/lh/quarantine",
        "/data/lh/quality",
    ]
    assert lh.is_local
    assert lh.local_root() == Path("/data/lh").resolve()
    assert lh.local_quality_dir() == Path("/data/lh").resolve() / "quality"
    assert lh.local_quality_docs() == Path("/data/lh").resolve() / "quality" / "docs"


@pytest.mark.parametrize("root", ["/data/lh/", "/data/lh//", "/data/lh"])
def test_a_trailing_slash_names_the_same_paths(root: str) -> None:
    assert Layout(root) == Layout("/data/lh")
    assert Layout(root).silver_table("t") == "/data/lh/silver/t"
    assert Layout.app_id_file("/data/lh/_checkpoints/bronze/x/") == (
        "/data/lh/_checkpoints/bronze/x/_protolake_app_id"
    )


def test_an_object_store_root_keeps_its_scheme() -> None:
    lh = Layout("s3a://bucket/prefix/")
    assert lh.root == "s3a://bucket/prefix"
    assert lh.bronze_table("t") == "s3a://bucket/prefix/bronze/t"
    assert lh.quarantine == "s3a://bucket/prefix/quarantine/records"
    assert lh.quality_results == "s3a://bucket/prefix/quality/results"
    assert lh.checkpoint("silver", "t") == "s3a://bucket/prefix/_checkpoints/silver/t"
    assert not lh.is_local
    with pytest.raises(ValueError, match="not a local folder"):
        lh.local_root()
    with pytest.raises(ValueError, match="not a local folder"):
        lh.local_quality_docs()
    assert Layout("s3a://bucket").silver == "s3a://bucket/silver"


def test_relative_and_file_roots() -> None:
    assert Layout("./lakehouse").bronze == "./lakehouse/bronze"  # spelled as configured
    assert Layout("./lakehouse").local_root() == Path("lakehouse").resolve()
    assert Layout("~/lh").local_root() == Path("~/lh").expanduser().resolve()
    for root in ("file:///data/lh", "file:/data/lh"):
        lh = Layout(root)
        assert lh.is_local
        assert lh.local_root() == Path("/data/lh")
        assert lh.silver == f"{root}/silver"


@pytest.mark.parametrize("root", ["", "   ", "s3a://", "s3a:///"])
def test_a_root_naming_nothing_is_refused(root: str) -> None:
    with pytest.raises(ValueError):
        Layout(root)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "/abs"])
def test_a_name_is_one_folder(name: str) -> None:
    lh = Layout("/lh")
    for path_of in (
        lh.bronze_table,
        lh.silver_table,
        lambda n: lh.checkpoint("silver", n),
        lambda n: lh.checkpoint(n, "x"),
    ):
        with pytest.raises(ValueError, match="not a table or checkpoint name"):
            path_of(name)


def test_an_unknown_layer_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown lakehouse layer 'gold'"):
        Layout("/lh").layer("gold")


def test_helpers() -> None:
    assert has_scheme("abfss://c@a.dfs.core.windows.net/lh")
    assert not has_scheme("/tmp/lh")
    assert table_name("file:/lh/silver/shop_order_1a2b/") == "shop_order_1a2b"
    assert table_name("s3a://b/lh/bronze/t") == "t"
    assert local_path("s3a://b/x") is None
    assert local_path("file:///x/y") == Path("/x/y")
    assert local_path("file:/x/y") == Path("/x/y")
    assert local_path("file://localhost/x/y") == Path("/x/y")
    assert local_path("file://elsewhere/x/y") is None
    assert local_path("rel") == Path("rel").resolve()
