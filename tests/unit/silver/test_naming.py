"""The silver table naming rule: stable, readable, collision-free, a valid identifier."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.naming import bronze_table_of_topic, table_name_for


def test_readable_slug_and_hash_of_exact_name() -> None:
    name = table_name_for("shop.v1.Order.LineItem")
    digest = hashlib.sha256(b"shop.v1.Order.LineItem").hexdigest()[:8]
    assert name == f"shop_v1_order_lineitem_{digest}"


def test_nested_type_gets_its_own_table() -> None:
    assert table_name_for("shop.v1.Order") != table_name_for("shop.v1.Order.LineItem")


@pytest.mark.parametrize(
    "a,b",
    [
        ("shop.v1.Order", "shop.v1_Order"),
        ("shop.v1.Order", "shop.v1.ORDER"),
        ("shop.v1.Order", "shop.v1.order"),
        ("a.b_c", "a_b.c"),
        ("a.b__c", "a.b_c"),
    ],
)
def test_names_the_slug_merges_stay_apart(a: str, b: str) -> None:
    assert table_name_for(a) != table_name_for(b)
    assert table_name_for(a).rsplit("_", 1)[0] == table_name_for(b).rsplit("_", 1)[0]


def test_leading_dot_is_the_same_name() -> None:
    assert table_name_for(".shop.v1.Order") == table_name_for("shop.v1.Order")


@pytest.mark.parametrize("bad", ["", "shop..Order", "shop.1Order", "shop Order", "shop/Order"])
def test_rejects_non_protobuf_names(bad: str) -> None:
    with pytest.raises(ValueError, match="not a fully-qualified"):
        table_name_for(bad)


def test_long_names_are_bounded() -> None:
    name = table_name_for("a." + "VeryLongMessageName" * 20)
    assert len(name) <= 100 + 9


_IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
_NAMES = st.lists(_IDENT, min_size=1, max_size=5).map(".".join)


@given(_NAMES)
def test_always_a_plain_identifier_and_stable(full: str) -> None:
    name = table_name_for(full)
    assert re.fullmatch(r"[a-z0-9_]+", name)
    assert table_name_for(full) == name


@given(_NAMES, _NAMES)
def test_distinct_names_distinct_tables(a: str, b: str) -> None:
    if a != b:
        assert table_name_for(a) != table_name_for(b)


def test_bronze_table_of_topic() -> None:
    assert bronze_table_of_topic("Shop.Orders-v1") == "shop_orders_v1"
