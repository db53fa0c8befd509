"""Random torn tails: wherever the disk image ends, recovery keeps exactly the messages
that end before that point, and the consume queues agree with them."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from .conftest import SEGMENT, StoreFactory, rec
from .test_recovery import QUIET, crash_copy


def lose_tail(root: Path, cut: int) -> None:
    """Zero the commitlog from ``cut`` on, as if those pages never reached the disk."""
    directory = root / "commitlog"
    for name in sorted(os.listdir(directory)):
        start = int(name)
        if start > cut:
            (directory / name).unlink()
        elif cut < start + SEGMENT:
            with open(directory / name, "r+b") as f:
                f.truncate(cut - start)
                f.truncate(SEGMENT)


@pytest.mark.parametrize("seed", range(8))
async def test_random_torn_tail(store_factory: StoreFactory, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    store = store_factory(**QUIET)
    await store.start()
    written = []
    for i in range(rng.randint(20, 60)):
        qid = rng.randint(0, 2)
        r = await store.put_message(rec(i, queue_id=qid, size=rng.randint(1, 1500)))
        written.append((r.commitlog_offset, r.next_commitlog_offset, qid, i))
    await store.wait_dispatched()
    copy = crash_copy(store, tmp_path / "copy")
    cut = rng.randint(0, store.commitlog_max_offset)
    lose_tail(copy, cut)

    again = store_factory(root=copy, **QUIET)
    await again.start()
    kept = [w for w in written if w[1] <= cut]
    kept_end = kept[-1][1] if kept else 0
    end = again.commitlog_max_offset
    segment_end = (kept_end // SEGMENT + 1) * SEGMENT  # a surviving blank pads to here
    assert kept_end <= end and (end <= cut or end == segment_end)
    for qid in range(3):
        want = [f"id-{i}" for _, _, q, i in kept if q == qid]
        got = again.get_messages("T", qid, 0, 1000).messages
        assert [m.msg_id for m in got] == want
        assert again.max_offset("T", qid) == len(want)
    nxt = await again.put_message(rec(999, queue_id=1))
    assert nxt.queue_offset == len([w for w in kept if w[2] == 1])
    assert nxt.commitlog_offset >= kept_end
