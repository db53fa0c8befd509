"""What a client carries back names its group: receipt handles (the broker writes the
group in) and proxy-wrapped transaction ids and recall handles."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqcluster.broker.messaging.receipt import ReceiptHandle
from mqcluster.proxy.tokens import TokenError, receipt_group, unwrap, wrap

names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF), min_size=1, max_size=40)


@given(group=names, token=st.text(min_size=1, max_size=80))
def test_a_wrapped_token_gives_back_its_group_and_the_brokers_token(group: str,
                                                                   token: str) -> None:
    assert unwrap(wrap(group, token)) == (group, token)


def test_an_empty_token_stays_empty() -> None:
    assert wrap("broker-a", "") == ""


@pytest.mark.parametrize("text, problem", [
    ("", "not issued by a proxy"),
    ("7F000001-tid", "not issued by a proxy"),
    ("mqp1:x:broker-a123", "bad group length"),
    ("mqp1:0:abc", "bad group length"),
    ("mqp1:99:broker-a", "bad group length"),
    ("mqp1:8:broker-a", "nothing after the group"),
])
def test_a_token_the_proxy_did_not_make_is_refused_with_the_reason(text: str,
                                                                   problem: str) -> None:
    with pytest.raises(TokenError, match=problem):
        unwrap(text, "transaction_id")


@given(group=st.text(st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters="~"),
                     min_size=1, max_size=30))
def test_the_group_of_a_brokers_receipt_handle(group: str) -> None:
    handle = ReceiptHandle("T", 3, 42, 1_700_000_000_000, 30_000, 2, group).encode()
    assert receipt_group(handle) == group


def test_a_receipt_handle_altered_or_of_another_format_is_refused() -> None:
    handle = ReceiptHandle("T", 3, 42, 1, 30_000, 2, "broker-a").encode()
    with pytest.raises(TokenError, match="corrupted"):
        receipt_group(handle.replace("broker-a", "broker-b"))
    with pytest.raises(TokenError, match="corrupted"):
        receipt_group("not-a-handle")
