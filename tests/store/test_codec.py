from __future__ import annotations

from mqcluster.store import codec
from mqcluster.store.codec import RecordKind
from mqcluster.store.filter import TagFilter, tags_code
from mqcluster.store.message import MessageRecord, StoredMessage


def _encoded(body: bytes = b"hello", **kw: object) -> bytes:
    rec = MessageRecord("TopicA", 3, body, tags="TagA", keys=["a", "b"],
                        properties={"UNIQ_KEY": "U1", "x": "y"}, born_timestamp=5,
                        born_host="1.2.3.4:9", flag=7, sys_flag=0, reconsume_times=2)
    return codec.encode(codec.prepare(rec, "127.0.0.1:10911"), 11, 4096, 123456)


def test_round_trip() -> None:
    raw = _encoded()
    checked = codec.check(raw, 0, 4096, True, 1 << 20)
    assert checked.kind is RecordKind.MESSAGE and checked.size == len(raw)
    assert checked.info is not None
    assert (checked.info.topic, checked.info.queue_id, checked.info.queue_offset) == (
        "TopicA", 3, 11)
    assert checked.info.tags_code == tags_code("TagA")
    msg = codec.decode(raw)
    assert isinstance(msg, StoredMessage)
    assert (msg.topic, msg.queue_id, msg.body, msg.tags, msg.keys) == (
        "TopicA", 3, b"hello", "TagA", ["a", "b"])
    assert msg.properties == {"UNIQ_KEY": "U1", "x": "y"}
    assert (msg.queue_offset, msg.commitlog_offset, msg.store_timestamp) == (11, 4096, 123456)
    assert (msg.flag, msg.reconsume_times, msg.born_host) == (7, 2, "1.2.3.4:9")
    assert msg.msg_id == "U1"
    assert msg.offset_msg_id == "7F00000100002A9F0000000000001000"


def test_flipped_bit_is_detected_anywhere_after_the_crc() -> None:
    raw = _encoded(b"x" * 200)
    for pos in range(codec.CRC_FROM, len(raw), 7):
        bad = bytearray(raw)
        bad[pos] ^= 0x10
        assert codec.check(bytes(bad), 0, 4096, True, 1 << 20).kind is RecordKind.CORRUPT


def test_wrong_position_is_corrupt() -> None:
    raw = _encoded()
    checked = codec.check(raw, 0, 8192, True, 1 << 20)
    assert checked.kind is RecordKind.CORRUPT and "physical offset" in checked.reason


def test_zeros_blank_and_incomplete() -> None:
    assert codec.check(bytes(64), 0, 0, True, 1 << 20).kind is RecordKind.END
    assert codec.check(codec.encode_blank(100), 0, 0, True, 1 << 20).kind is RecordKind.BLANK
    raw = _encoded()
    assert codec.check(raw[:-1], 0, 4096, True, 1 << 20).kind is RecordKind.INCOMPLETE


def test_tags_code_matches_java_string_hash() -> None:
    assert tags_code("TagA") == 2598919
    assert tags_code("hello world") == 1794106052
    assert tags_code("polygenelubricants") == -(2**31)
    assert tags_code(None) == 0


def test_tag_filter() -> None:
    f = TagFilter.of("A || B")
    assert f.codes == {tags_code("A"), tags_code("B")}
    msg = codec.decode(_encoded())
    assert not f(msg)
    assert TagFilter.of("TagA")(msg)
    assert TagFilter.of("*").matches_all
