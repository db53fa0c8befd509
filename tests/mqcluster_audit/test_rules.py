"""The history rules that both the chaos checker and the Spark ``history`` job apply."""

from __future__ import annotations

from mqcluster_audit.rules import (
    Receipt,
    StoredCopy,
    classify_copies,
    lost,
    max_unavailable_ms,
    receive_reordered,
    send_attempts,
    store_reordered,
    unavailable_windows,
)


def copy(key: str, pos: int, msg_id: str | None = "id", seq: int | None = None) -> StoredCopy:
    return StoredCopy(key, msg_id, "T", 0, str(pos), "g" if seq is not None else None, seq)


def test_lost_is_acknowledged_and_in_no_copy() -> None:
    assert lost(["a", "b", "c"], ["a", "c", "x"]) == ["b"]


def test_retry_copies_are_told_from_store_duplicates() -> None:
    copies = [copy("retry", 1, "m1"), copy("retry", 2, "m1"),   # separate appends, one id
              copy("twice", 3, "m2"), copy("twice", 3, "m2"),   # one append stored twice
              copy("reminted", 4, "m3"), copy("reminted", 5, "m4"),
              copy("anonymous", 6, None), copy("anonymous", 7, None),
              copy("once", 8, "m5")]
    attempts = {k: 2 for k in ("retry", "twice", "reminted", "anonymous", "once")}
    assert classify_copies(copies, attempts) == (["anonymous", "reminted", "twice"], ["retry"])


def test_a_retry_copy_the_client_never_attempted_is_a_store_duplicate() -> None:
    copies = [copy("k", 1, "m1"), copy("k", 2, "m1"), copy("k", 3, "m1")]
    assert classify_copies(copies, {"k": 3}) == ([], ["k"])
    assert classify_copies(copies, {"k": 2}) == (["k"], []), "a third copy, two attempts"
    assert classify_copies(copies[:2], {"k": 1}) == (["k"], []), "sent once, stored twice"
    assert classify_copies(copies[:2], {}) == (["k"], []), "never seen sent"


def test_attempts_count_the_sends_up_to_the_first_ack() -> None:
    history = [("send", "a"), ("send", "b"), ("send", "a"), ("ack", "a"),
               ("send", "a"),  # after its ack: cannot explain a copy the ack was for
               ("fail", "b"), ("receive", "a"), ("send", "c"), ("send", "c")]
    assert send_attempts(history) == {"a": 2, "b": 1, "c": 2}


def test_store_order_of_acknowledged_first_copies() -> None:
    copies = [copy("k0", 0, seq=0), copy("k2", 1, seq=2), copy("k1", 2, seq=1),
              copy("k3", 3, seq=3), copy("k2", 4, seq=2)]  # a retry copy later: fine
    assert store_reordered(copies, ["k0", "k1", "k2", "k3"]) == ["k1"]
    assert store_reordered(copies, ["k0", "k2", "k3"]) == [], "k1 was never acknowledged"


def test_redelivery_is_not_a_reorder() -> None:
    def r(key: str, seq: int, group: str = "G") -> Receipt:
        return Receipt(group, "order-1", key, seq)

    got = receive_reordered([r("k1", 1), r("k2", 2), r("k1", 1), r("k2", 2), r("k4", 4),
                             r("k3", 3), r("k0", 0, "H")])
    assert got == [r("k3", 3)]


def test_unavailability() -> None:
    times = [1000, 1010, 4010, 4020, 4500]
    assert unavailable_windows(times, 1000) == [(1010, 4010)]
    assert max_unavailable_ms(times) == 3000
    assert max_unavailable_ms([5]) == 0
