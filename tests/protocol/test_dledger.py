"""A DLedger peer's BROKER_ADDRESSES answer is checked before it is used: whatever a peer
answers, the follower gets addresses and an entry version, or a ValueError it retries on."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqcluster.protocol.dledger import decode_addresses

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["broker", "grpc", "entryVersion", "x"]), inner, max_size=4),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.one_of(JSON.map(lambda v: json.dumps(v).encode()), st.binary(max_size=40)))
def test_any_answer_is_addresses_or_value_error(body: bytes) -> None:
    try:
        doc = decode_addresses(body)
    except ValueError:
        return
    assert isinstance(doc, dict)
    assert all(doc.get(k) is None or isinstance(doc[k], str) for k in ("broker", "grpc"))
    assert type(doc.get("entryVersion", 2)) is int


@pytest.mark.parametrize("body", [b"[]", b'{"broker": 5}', b'{"entryVersion": "3"}',
                                  b"[" * 100_000])
def test_malformed_answers_are_value_errors(body: Any) -> None:
    with pytest.raises(ValueError):
        decode_addresses(body)


def test_a_good_answer() -> None:
    body = b'{"broker": "127.0.0.5:10911", "grpc": "127.0.0.5:8081", "entryVersion": 3}'
    assert decode_addresses(body)["entryVersion"] == 3
