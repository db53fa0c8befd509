"""Property: whatever one damaged record looks like, recovery cuts there and loses only it.

Every record after it is counted as intact and kept, byte for byte, in the file it is
copied to; the store keeps every record before it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mqcluster.store import MessageStore

from .conftest import make_config, rec
from .test_damage import messages_in

SEGMENT = 64 * 1024
COUNT = 40


def written_store(root: Path, sizes: list[int]) -> list[tuple[int, int]]:
    """A closed store of one record per size; each record's (offset, size)."""
    store = MessageStore(make_config(root, mappedFileSizeCommitLog=SEGMENT))
    store.open()
    try:
        results, _ = store.append_records([rec(i, size=s) for i, s in enumerate(sizes)],
                                          1_700_000_000_000)
    finally:
        store.close()
    return [(r.commitlog_offset, r.store_size) for r in results]


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 300), min_size=COUNT, max_size=COUNT),
       victim=st.integers(0, COUNT - 1), data=st.data())
def test_one_damaged_record_costs_only_itself(sizes: list[int], victim: int,
                                              data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        placed = written_store(root, sizes)
        offset, size = placed[victim]
        start = data.draw(st.integers(0, size - 1), label="first damaged byte")
        length = data.draw(st.integers(1, size - start), label="damaged bytes")
        zeroed = data.draw(st.booleans(), label="zeroed")
        path = root / "commitlog" / f"{0:020d}"
        with open(path, "r+b") as f:
            f.seek(offset + start)
            old = f.read(length)
            # Zeros (a lost write), or every byte changed (flipped bits).
            new = bytes(length) if zeroed else bytes(b ^ 0x5A for b in old)
            f.seek(offset + start)
            f.write(new)
        tail = path.read_bytes()[offset:placed[-1][0] + placed[-1][1]]
        damaged = old != new

        store = MessageStore(make_config(root, mappedFileSizeCommitLog=SEGMENT))
        store.open()
        try:
            report = store.recovery
            assert report is not None
            if not damaged:  # (zeros written over zeros: nothing changed)
                assert report.truncated_at is None and store.max_offset("T", 0) == COUNT
                return
            assert report.truncated_at == offset
            assert store.max_offset("T", 0) == victim
            after = COUNT - victim - 1
            assert report.intact_lost == after
            assert report.records_lost == after + 1 or (
                not report.records_lost_exact and report.records_lost >= after + 1)
            if victim < COUNT - 1 or tail.rstrip(b"\0"):
                (kept,) = report.set_aside
                copy = Path(kept).read_bytes()
                assert tail.startswith(copy) and not tail[len(copy):].strip(b"\0")
                assert messages_in(copy, offset) == [f"k{i}" for i in range(victim + 1, COUNT)]
        finally:
            store.close()
