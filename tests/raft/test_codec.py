"""Raft messages survive encode -> frame bytes -> decode, and bad frames are rejected."""

from __future__ import annotations

import dataclasses
import struct
import zlib
from typing import Any

import pytest

from mqcluster.raft.codec import (
    MESSAGE_CODES,
    EntriesBodyCache,
    decode_entries,
    decode_message,
    encode_entries,
    encode_message,
    pack_values,
    unpack_values,
)
from mqcluster.raft.disk_log import encode_record
from mqcluster.raft.types import (
    AppendRequest,
    AppendResponse,
    AppendResponseCode,
    Entry,
    EntryType,
    HeartbeatRequest,
    HeartbeatResponse,
    HeartbeatResponseCode,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    InstallSnapshotResponseCode,
    Membership,
    Message,
    Snapshot,
    SnapshotMeta,
    TimeoutNowRequest,
    VoteRequest,
    VoteResponse,
    VoteResponseCode,
)
from mqcluster.wire.frame import FrameDecoder, FrameError, RemotingCommand, encode_frame

ENTRIES = [
    Entry(7, 3, EntryType.NOOP, b""),
    Entry(8, 3, EntryType.NORMAL, bytes(range(256)) * 4),
    Entry(9, 4, EntryType.CONFIG, b'{"voters":["a"],"learners":[]}'),
]
SNAPSHOT = Snapshot(SnapshotMeta(99, 5, Membership(["n0", "n1", "n2"], ["n3"])), b"\x00state\xff")

SAMPLES: list[Message] = [
    VoteRequest("n0", "n1", term=4, ledger_end_index=10, ledger_end_term=3, round=2),
    VoteResponse("n1", "n0", 4, VoteResponseCode.REJECT_SMALL_LEDGER_END_INDEX, 4, 2),
    HeartbeatRequest("n0", "n2", term=4, commit_index=9, round=11),
    HeartbeatResponse("n2", "n0", 4, HeartbeatResponseCode.TERM_NOT_READY, 11, 8),
    AppendRequest("n0", "n1", 4, 6, 3, ENTRIES, commit_index=6, seq=42),
    AppendRequest("n0", "n1", 4, 6, 3, [], commit_index=6, seq=43),
    AppendResponse("n1", "n0", 4, AppendResponseCode.INCONSISTENT_STATE, 6, 0, 5, 42),
    InstallSnapshotRequest("n0", "n3", 5, SNAPSHOT),
    InstallSnapshotResponse("n3", "n0", 5, InstallSnapshotResponseCode.SUCCESS, 99),
    TimeoutNowRequest("n0", "n1", 5),
]


def through_the_wire(cmd: RemotingCommand) -> RemotingCommand:
    (out,) = FrameDecoder().feed(encode_frame(cmd))
    return out


def test_every_message_type_has_a_sample() -> None:
    assert {type(m) for m in SAMPLES} == set(MESSAGE_CODES)


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_roundtrip(msg: Message) -> None:
    cmd = encode_message(msg)
    assert 2001 <= cmd.code <= 2049
    assert cmd.is_oneway
    back = decode_message(through_the_wire(cmd))
    assert back == msg
    assert type(back) is type(msg)
    for f in dataclasses.fields(back):  # enums come back as enums, not ints
        assert type(getattr(back, f.name)) is type(getattr(msg, f.name)), f.name


def test_entries_travel_in_the_body_as_binary() -> None:
    cmd = encode_message(AppendRequest("n0", "n1", 4, 6, 3, ENTRIES, 6, 1))
    assert sum(len(e.data) for e in ENTRIES) < len(cmd.body) < 2 * sum(len(e.data) for e in ENTRIES)
    assert "entries" not in cmd.ext_fields
    assert bytes(range(256)) * 4 in cmd.body


def test_entries_roundtrip_many() -> None:
    batch = [Entry(i, 2, EntryType.NORMAL, i.to_bytes(4, "big") * 256) for i in range(1, 500)]
    assert decode_entries(encode_entries(batch)) == batch


def test_optional_field_absent_means_none() -> None:
    # No message has an optional scalar today; the rule still holds for the codec itself.
    msg = HeartbeatRequest("n0", "n1", term=1)
    cmd = encode_message(msg)
    assert decode_message(cmd) == msg


APPEND = AppendRequest("n0", "n1", 4, 6, 3, ENTRIES, 6, 1)
APPEND_RESP = AppendResponse("n1", "n0", 4, AppendResponseCode.SUCCESS)


def _drop_term(c: RemotingCommand) -> None:
    del c.ext_fields["term"]


def _set(field: str, value: str) -> Any:
    return lambda c: c.ext_fields.__setitem__(field, value)


def _body(change: Any) -> Any:
    return lambda c: setattr(c, "body", change(c.body))


@pytest.mark.parametrize(
    ("msg", "mutate", "match"),
    [
        (APPEND, _drop_term, "missing field 'term'"),
        (APPEND, _set("term", "x"), "term: 'x' is not a non-negative decimal integer"),
        (APPEND_RESP, _set("code", "77"), "code: 77 is not a AppendResponseCode"),
        (APPEND, _body(lambda b: b[:-3]), "past the end"),
        (APPEND, _body(lambda b: b + bytes(5)), "truncated entry header"),
        (APPEND, lambda c: setattr(c, "code", 2048), "not a raft message"),
    ],
)
def test_malformed_messages_raise_frame_error(msg: Message, mutate: Any, match: str) -> None:
    cmd = encode_message(msg)
    mutate(cmd)
    with pytest.raises(FrameError, match=match):
        decode_message(cmd)


def _record(index: int, term: int, typ: int, data: bytes) -> bytes:
    payload = struct.pack(">QQB", index, term, typ) + data
    return struct.pack(">II", len(payload), zlib.crc32(payload)) + payload


def test_entries_body_is_the_disk_record_format() -> None:
    body = encode_entries(ENTRIES)
    assert body == b"".join(encode_record(e) for e in ENTRIES)


def test_a_damaged_record_fails_its_crc() -> None:
    body = bytearray(encode_entries(ENTRIES))
    body[len(body) // 2] ^= 0x40
    with pytest.raises(FrameError, match="CRC mismatch"):
        decode_entries(bytes(body))
    with pytest.raises(FrameError, match="length 3 out of range"):
        decode_entries(struct.pack(">II", 3, 0) + bytes(30))


def test_bad_entry_type_and_snapshot_body() -> None:
    with pytest.raises(FrameError, match="unknown entry type 9"):
        decode_entries(_record(7, 3, 9, b"x"))
    cmd = encode_message(InstallSnapshotRequest("n0", "n3", 5, SNAPSHOT))
    cmd.body = b"\x00\x00\x10\x00{}"
    with pytest.raises(FrameError, match="exceeds"):
        decode_message(cmd)
    cmd.body = b"\x00\x00\x00\x02{}"
    with pytest.raises(FrameError, match="bad snapshot metadata"):
        decode_message(cmd)


def test_values_roundtrip_and_truncation() -> None:
    values = [b"", b"a", b"x" * 5000]
    assert unpack_values(pack_values(values)) == values
    with pytest.raises(FrameError):
        unpack_values(pack_values(values)[:-1])
    with pytest.raises(FrameError):
        unpack_values(b"\x00\x00")


def test_entries_body_cache_encodes_a_batch_once() -> None:
    cache = EntriesBodyCache()
    batch = ENTRIES[1:]
    first = encode_message(AppendRequest("n0", "n1", 4, 7, 3, batch, 6, 1), cache)
    second = encode_message(AppendRequest("n0", "n2", 4, 7, 3, list(batch), 6, 2), cache)
    assert first.body is second.body
    assert decode_message(second) == AppendRequest("n0", "n2", 4, 7, 3, batch, 6, 2)
    other_term = [Entry(8, 5, EntryType.NORMAL, b"x"), Entry(9, 5, EntryType.NORMAL, b"y")]
    third = encode_message(AppendRequest("n0", "n1", 5, 7, 3, other_term, 6, 3), cache)
    assert decode_entries(third.body) == other_term


def test_body_cache_reuses_records_by_index_and_term() -> None:
    cache = EntriesBodyCache()
    batch = [Entry(i, 2, EntryType.NORMAL, bytes([i]) * 100) for i in range(1, 11)]
    whole = cache.body(batch)
    rebuilt = [Entry(e.index, e.term, e.type, e.data) for e in batch]
    assert cache.body(rebuilt) is whole  # the same entries again: the same buffer
    assert cache.body(batch[3:7]) == encode_entries(batch[3:7])  # a slice of it
    # The same index in another term (another leader's entry) is never served from the cache.
    other = [Entry(4, 3, EntryType.NORMAL, b"other leader")]
    assert cache.body(other) == encode_entries(other)
    # A batch with a gap is encoded afresh and not remembered.
    gapped = [Entry(20, 2, EntryType.NORMAL, b"a"), Entry(22, 2, EntryType.NORMAL, b"b")]
    assert cache.body(gapped) == encode_entries(gapped)
    assert 20 not in cache._by_index
    # Runs from several buffers join up.
    more = [Entry(i, 3, EntryType.NORMAL, b"m") for i in range(11, 14)]
    assert cache.body([*batch[8:], *more]) == encode_entries([*batch[8:], *more])


def test_decoded_records_are_cached_for_the_followers_disk_write() -> None:
    cache = EntriesBodyCache()
    cmd = encode_message(APPEND)
    msg = decode_message(cmd, cache)
    assert isinstance(msg, AppendRequest)
    assert cache.body(msg.entries) is cmd.body
    assert cache.body(msg.entries[1:]) == encode_entries(ENTRIES[1:])


def test_body_cache_stays_within_its_capacity() -> None:
    cache = EntriesBodyCache(capacity_bytes=1000)
    batches = [[Entry(i, 1, EntryType.NORMAL, bytes(300))] for i in range(1, 8)]
    for b in batches:
        cache.body(b)
    assert cache.body(batches[-1]) == encode_entries(batches[-1])
    assert sum(len(r.body) for r in cache._runs) <= 1000
    cached = {r.first_index + k for r in cache._runs for k in range(len(r.terms))}
    assert set(cache._by_index) == cached
