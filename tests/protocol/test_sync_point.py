"""RIP-44's truncation point, one row per situation of the design's example analysis."""

from __future__ import annotations

import pytest

from mqcluster.protocol.sync_point import NoCommonEpochError, SyncPoint, find_sync_point, with_ends

Starts = list[tuple[int, int]]

CASES: list[tuple[str, Starts, int, int, Starts, int, SyncPoint]] = [
    # name, slave terms, slave min, slave max, master terms, master max, expected
    ("slave behind in the same term", [(1, 0)], 0, 800, [(1, 0)], 1000, SyncPoint(800)),
    ("slave level with the master", [(1, 0), (2, 500)], 0, 900, [(1, 0), (2, 500)], 900,
     SyncPoint(900)),
    ("demoted master with an unreplicated tail", [(1, 0)], 0, 1000, [(1, 0), (2, 900)], 1200,
     SyncPoint(900)),
    ("lost its async-flushed tail, then behind a newer term", [(1, 0)], 0, 900,
     [(1, 0), (2, 1000)], 1200, SyncPoint(900)),
    ("a term the master never had", [(1, 0), (2, 800), (3, 1000)], 0, 1100,
     [(1, 0), (2, 800), (4, 1000)], 1300, SyncPoint(1000)),
    ("same term, different start offset", [(1, 0), (2, 700)], 0, 900,
     [(1, 0), (2, 800)], 1000, SyncPoint(700)),
    ("terms both sides had, the master's shorter", [(1, 0), (2, 800)], 0, 1200,
     [(1, 0), (2, 800), (3, 1000)], 1500, SyncPoint(1000)),
    ("master deleted old segments, overlap kept", [(1, 0), (2, 500)], 0, 2000,
     [(2, 1024), (3, 3000)], 4000, SyncPoint(2000)),
    ("master deleted everything the slave has", [(1, 0)], 0, 500, [(1, 1024), (2, 2048)],
     4000, SyncPoint(0, restart_empty=True)),
    ("slave deleted old segments", [(2, 1024)], 1024, 2500, [(1, 0), (2, 500), (3, 3000)],
     4000, SyncPoint(2500)),
    ("empty slave", [], 0, 0, [(1, 0), (2, 500)], 900, SyncPoint(0, restart_empty=True)),
    ("empty slave with stale terms", [(1, 0)], 0, 0, [(2, 0)], 900,
     SyncPoint(0, restart_empty=True)),
]


@pytest.mark.parametrize(("name", "slave", "smin", "smax", "master", "mmax", "expected"),
                         CASES, ids=[c[0] for c in CASES])
def test_sync_point(name: str, slave: Starts, smin: int, smax: int, master: Starts, mmax: int,
                    expected: SyncPoint) -> None:
    got = find_sync_point(with_ends(slave, smax), smin, smax, with_ends(master, mmax))
    assert got == expected


def test_no_common_epoch_needs_a_person() -> None:
    with pytest.raises(NoCommonEpochError, match=r"slave terms 3@0.*master terms 4@0"):
        find_sync_point(with_ends([(3, 0)], 500), 0, 500, with_ends([(4, 0)], 900))


def test_data_without_epochs_is_not_wiped() -> None:
    with pytest.raises(NoCommonEpochError, match="no epochs"):
        find_sync_point([], 0, 500, with_ends([(1, 0)], 900))
