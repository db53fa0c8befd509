"""The history rules that both the chaos checker and the Spark ``history`` job apply."""

from __future__ import annotations

from mqcluster_audit.rules import (
    Receipt,
    StoredCopy,
    classify_copies,
    lost,
    max_unavailable_ms,
    receive_reordered,
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
    assert classify_copies(copies) == (["anonymous", "reminted", "twice"], ["retry"])


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
