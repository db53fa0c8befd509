"""The name rules shared by the gRPC endpoint and the remoting handlers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqcluster.protocol.names import (
    group_name_problem,
    key_problem,
    message_group_problem,
    properties_text_problem,
    property_problem,
    tag_problem,
    topic_name_problem,
)

LEGAL = st.text("abcXYZ019%|_-", min_size=1, max_size=40)


@given(LEGAL)
def test_names_of_rocketmqs_characters_are_legal(name: str) -> None:
    assert topic_name_problem(name) is None
    assert group_name_problem(name) is None


@pytest.mark.parametrize("name", ["", "a b", "a/b", "../x", "a\n", "\na", "a.b", "é"])
def test_other_names_are_refused_with_the_reason(name: str) -> None:
    problem = topic_name_problem(name)
    assert problem is not None and "topic" in problem
    problem = group_name_problem(name, "producer group")
    assert problem is not None and "producer group" in problem


def test_length_limits_are_rocketmqs() -> None:
    assert topic_name_problem("t" * 127) is None
    assert "longer than 127" in (topic_name_problem("t" * 128) or "")
    assert group_name_problem("g" * 255) is None
    assert "longer than 255" in (group_name_problem("g" * (1 << 20)) or "")


@pytest.mark.parametrize("bad", ["\x01", "\x02", "\x00", "\n", "\x7f", "\x85"])
def test_control_characters_are_refused_everywhere(bad: str) -> None:
    assert tag_problem(f"t{bad}") is not None
    assert key_problem(f"k{bad}") is not None
    assert message_group_problem(f"g{bad}", 64) is not None
    assert property_problem(f"k{bad}", "v") is not None
    assert property_problem("k", f"v{bad}") is not None


def test_tags_keys_and_groups() -> None:
    assert tag_problem("TagA") is None
    assert tag_problem("a|b") is not None and tag_problem(" ") is not None
    assert key_problem("order-1") is None
    assert key_problem("two keys") is not None  # (a space separates stored keys)
    assert message_group_problem("g" * 64, 64) is None
    assert message_group_problem("g" * 65, 64) is not None
    assert property_problem("k", "") is None and property_problem(" ", "v") is not None


def test_a_remoting_properties_string_may_hold_only_its_separators() -> None:
    assert properties_text_problem("TAGS\x01a\x02KEYS\x01k1 k2\x02") is None
    assert properties_text_problem("a\x01b\nc\x02") is not None
    assert properties_text_problem("a\x01b\x00\x02") is not None


@given(st.text(max_size=20))
def test_a_legal_value_never_holds_a_separator(value: str) -> None:
    if property_problem("k", value) is None:
        assert "\x01" not in value and "\x02" not in value
    if tag_problem(value) is None:
        assert not {"\x01", "\x02", "|"} & set(value)
