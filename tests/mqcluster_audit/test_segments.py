"""Bulk decoding of commitlog segments: every field, and damaged tails as flagged rows."""

from __future__ import annotations

from pathlib import Path

from mqcluster.store.offline import iter_messages
from mqcluster_audit.segments import decode_segment, read_segment, segment_files
from tests.mqcluster_audit.conftest import messages, write_store


def test_rows_match_the_stores_own_reader(tmp_path: Path) -> None:
    write_store(tmp_path, messages(300, queues=3))
    rows = [r for f in segment_files(tmp_path / "commitlog")
            for r in read_segment(f, "r0", with_body=True).to_pylist()]
    expected = list(iter_messages(str(tmp_path / "commitlog")))
    assert len(segment_files(tmp_path / "commitlog")) > 1
    assert [(r["physical_offset"], r["queue_id"], r["queue_offset"], r["keys"], r["body"])
            for r in rows] == [(m.commitlog_offset, m.queue_id, m.queue_offset,
                                " ".join(m.keys), m.body) for m in expected]
    assert all(r["status"] == "ok" and r["crc_ok"] for r in rows)


def test_a_torn_tail_is_one_flagged_row(tmp_path: Path) -> None:
    results = write_store(tmp_path, messages(20))
    seg = segment_files(tmp_path / "commitlog")[0]
    cut = results[-1].commitlog_offset + 30
    data = seg.read_bytes()[:cut]
    batch = decode_segment(data, 0, "r0", seg.name).to_pylist()
    assert [r["status"] for r in batch] == ["ok"] * 19 + ["truncated"]
    assert batch[-1]["physical_offset"] == results[-1].commitlog_offset


def test_a_flipped_byte_is_a_crc_failure_not_a_crash(tmp_path: Path) -> None:
    results = write_store(tmp_path, messages(20))
    seg = segment_files(tmp_path / "commitlog")[0]
    data = bytearray(seg.read_bytes())
    data[results[5].commitlog_offset + 100] ^= 0xFF
    rows = decode_segment(bytes(data), 0, "r0", seg.name).to_pylist()
    assert [i for i, r in enumerate(rows) if not r["crc_ok"]] == [5]
    assert rows[5]["status"] == "corrupt"
