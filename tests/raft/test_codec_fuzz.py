"""Property-based fuzzing of the Raft decoders: whatever arrives, the decoder answers
FrameError (the hard-state and snapshot files: CorruptFileError) or a message whose
every field is within the protocol's limits."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mqcluster.common.crc import crc32
from mqcluster.raft.codec import (
    MESSAGE_CODES,
    decode_message,
    decode_records,
    decode_snapshot_body,
    encode_message,
)
from mqcluster.raft.diskformat import (
    CorruptFileError,
    decode_hard_state,
    encode_hard_state,
    encode_records,
)
from mqcluster.raft.limits import MAX_ID_LENGTH, MAX_LONG
from mqcluster.raft.types import (
    AppendRequest,
    Entry,
    EntryType,
    HardState,
    InstallSnapshotRequest,
    Message,
)
from mqcluster.wire.frame import FrameDecoder, FrameError, RemotingCommand
from tests.raft.test_codec import SAMPLES

FUZZ = settings(max_examples=300, deadline=None, derandomize=True)

CODES = sorted(int(c) for c in MESSAGE_CODES.values())
FIELDS = sorted({f.name for cls in MESSAGE_CODES for f in dataclasses.fields(cls)})

# What a hostile or careless sender writes where a number or an id belongs.
NASTY = st.one_of(
    st.sampled_from([
        str(2**64), str(2**63), str(2**63 - 1), "-1", "-0", "+1", " 1", "1 ", "1_000", "01",
        "1.0", "1e3", "nan", "inf", "True", "true", "", "٣", "0x10", "9" * 5000, "n0 n1",
        "n\x00", "é", "x" * (MAX_ID_LENGTH + 1), "None", "null",
    ]),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.text(max_size=30),
)


def check_within_limits(msg: Message) -> None:
    """Every field of an accepted message is one the protocol allows."""
    for f in dataclasses.fields(msg):
        value = getattr(msg, f.name)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            assert 0 <= value <= MAX_LONG, (f.name, value)
        elif isinstance(value, str):
            assert 0 < len(value) <= MAX_ID_LENGTH and value.isprintable() and " " not in value
    if isinstance(msg, AppendRequest):
        index, term = msg.prev_index, msg.prev_term
        for e in msg.entries:
            index += 1
            assert e.index == index and term <= e.term <= msg.term
            term = e.term
    if isinstance(msg, InstallSnapshotRequest):
        meta = msg.snapshot.meta
        assert 0 <= meta.index <= MAX_LONG and 0 <= meta.term <= msg.term


def decode_or_refuse(cmd: RemotingCommand) -> Message | None:
    try:
        msg = decode_message(cmd)
    except FrameError:
        return None
    check_within_limits(msg)
    return msg


@FUZZ
@given(
    code=st.one_of(st.sampled_from(CODES), st.integers(-(2**31), 2**31)),
    ext=st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=8)),
                        st.one_of(NASTY, st.integers(0, 2**63 - 1).map(str)), max_size=10),
    body=st.binary(max_size=200),
)
def test_any_command_is_a_valid_message_or_frame_error(code: int, ext: dict[str, str],
                                                       body: bytes) -> None:
    decode_or_refuse(RemotingCommand(code=code, ext_fields=ext, body=body))


@FUZZ
@given(sample=st.sampled_from(SAMPLES), data=st.data())
def test_mutated_fields_are_refused_or_within_limits(sample: Message, data: Any) -> None:
    cmd = encode_message(sample)
    for name in data.draw(st.lists(st.sampled_from(sorted(cmd.ext_fields)), min_size=1,
                                   max_size=3, unique=True)):
        cmd.ext_fields[name] = data.draw(NASTY)
    decode_or_refuse(cmd)


@FUZZ
@given(sample=st.sampled_from([m for m in SAMPLES if encode_message(m).body]), data=st.data())
def test_mutated_bodies_are_refused_or_within_limits(sample: Message, data: Any) -> None:
    body = bytearray(encode_message(sample).body)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(body) - 1))
        body[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    cmd = encode_message(sample)
    cmd.body = bytes(body[:cut]) if data.draw(st.booleans()) else bytes(body)
    decode_or_refuse(cmd)


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_as_frames_never_raise_anything_else(raw: bytes) -> None:
    decoder = FrameDecoder(1 << 16)
    try:
        commands = decoder.feed(raw)
    except FrameError:
        return
    for cmd in commands:
        decode_or_refuse(cmd)


@FUZZ
@given(
    index=st.integers(0, 2**64 - 1), term=st.integers(0, 2**64 - 1),
    prev=st.integers(0, 2**63 - 1), prev_term=st.integers(0, 2**63 - 1),
    req_term=st.integers(0, 2**63 - 1), typ=st.sampled_from(list(EntryType)),
)
def test_entries_past_a_long_or_out_of_order_are_refused(
    index: int, term: int, prev: int, prev_term: int, req_term: int, typ: EntryType
) -> None:
    body, _ = encode_records([Entry(index, term, typ, b"x")])
    msg = AppendRequest("n0", "n1", req_term, prev, prev_term, [], commit_index=0)
    cmd = encode_message(msg)
    cmd.body = body
    accepted = decode_or_refuse(cmd)
    valid = index == prev + 1 and prev_term <= term <= req_term and index <= MAX_LONG
    assert (accepted is not None) == valid


@FUZZ
@given(st.binary(max_size=200))
def test_snapshot_and_record_bodies_refuse_garbage(raw: bytes) -> None:
    for decode in (decode_snapshot_body, decode_records):
        with contextlib.suppress(FrameError):
            decode(raw)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=8,
)


@FUZZ
@given(doc=st.one_of(JSON_VALUES, st.fixed_dictionaries({"term": JSON_VALUES,
                                                          "votedFor": JSON_VALUES})))
def test_hard_state_files_load_within_limits_or_name_the_file(doc: Any) -> None:
    path = Path("/store/hardstate")
    payload = json.dumps(doc).encode()
    raw = encode_hard_state(HardState(0, None))[:4]
    raw += crc32(payload).to_bytes(4, "big") + payload
    try:
        hs = decode_hard_state(raw, path)
    except CorruptFileError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        return
    assert type(hs.term) is int and 0 <= hs.term <= MAX_LONG
    assert hs.voted_for is None or (type(hs.voted_for) is str and hs.voted_for.isprintable())


@FUZZ
@given(st.binary(max_size=100))
def test_hard_state_garbage_is_a_corrupt_file(raw: bytes) -> None:
    with contextlib.suppress(CorruptFileError):
        decode_hard_state(raw, Path("hardstate"))
