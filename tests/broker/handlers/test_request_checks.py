"""Remoting requests whose fields are out of range or whose names break the shared rules
are refused with the field named, before anything is created, stored or saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqcluster.protocol.broker import BrokerResponseCode, RequestCode
from tests.broker.handlers.harness import Broker, remoting_broker

TOPIC = "T"


async def _topic(b: Broker, queues: int = 4, perm: int = 6) -> None:
    r = await b.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": TOPIC, "readQueueNums": str(queues), "writeQueueNums": str(queues),
        "perm": str(perm)})
    assert r.code == BrokerResponseCode.SUCCESS, r.remark


async def _send(b: Broker, sys_flag: int = 0, properties: str = "",
                topic: str = TOPIC) -> tuple[int, str | None]:
    r = await b.call(RequestCode.SEND_MESSAGE_V2, {
        "a": "PG", "b": topic, "e": "0", "f": str(sys_flag), "i": properties}, b"body")
    return r.code, r.remark


def _stored(b: Broker) -> int:
    return sum(b.ctx.store.max_offset(TOPIC, q) for q in range(4))


@pytest.fixture
async def broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    async with remoting_broker(tmp_path / "store") as b:
        await _topic(b)
        yield b


# ---- sysFlag ------------------------------------------------------------------


@pytest.mark.parametrize("sys_flag", [-1, 0x4, 0x8, 0xC])
async def test_a_transactional_remoting_send_is_refused_and_nothing_is_stored(
        broker: Broker, sys_flag: int) -> None:
    before = broker.ctx.store.commitlog_max_offset
    code, remark = await _send(broker, sys_flag)
    assert code == BrokerResponseCode.NO_PERMISSION
    assert remark is not None and "gRPC" in remark and f"sysFlag={sys_flag}" in remark
    assert _stored(broker) == 0
    assert broker.ctx.store.commitlog_max_offset == before


@pytest.mark.parametrize("sys_flag", [0x10, 0x20, 0x40, 0x80, 0x800, 1 << 30])
async def test_a_send_with_undefined_or_broker_only_sys_flag_bits_is_refused(
        broker: Broker, sys_flag: int) -> None:
    code, remark = await _send(broker, sys_flag)
    assert code == BrokerResponseCode.INVALID_REQUEST
    assert remark is not None and "sysFlag" in remark
    assert _stored(broker) == 0


async def test_a_sys_flag_outside_javas_int_is_refused_naming_the_field(broker: Broker) -> None:
    code, remark = await _send(broker, 2**40)
    assert code == BrokerResponseCode.INVALID_REQUEST
    assert remark is not None and "sysFlag" in remark


@pytest.mark.parametrize("sys_flag", [0, 0x1, 0x2, 0x3, 0x1 | 0x300])
async def test_the_flags_a_producer_may_set_are_accepted(broker: Broker, sys_flag: int) -> None:
    code, remark = await _send(broker, sys_flag)
    assert code == BrokerResponseCode.SUCCESS, remark
    assert _stored(broker) == 1


# ---- names ----------------------------------------------------------------------


@pytest.mark.parametrize("group", ["g" * (1 << 20), "../../etc/x\n#evil", "good\n", "a b", ""])
async def test_a_pull_with_an_illegal_group_name_creates_no_group(
        broker: Broker, group: str) -> None:
    before = broker.config_file("subscriptionGroup.json").read_bytes() if broker.config_file(
        "subscriptionGroup.json").exists() else b""
    r = await broker.call(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": TOPIC, "queueId": "0", "queueOffset": "0"})
    assert r.code == BrokerResponseCode.INVALID_REQUEST
    assert r.remark is not None
    assert "consumerGroup" in r.remark or "consumer group" in r.remark
    assert broker.ctx.store.subscriptions.get(group) is None
    after = broker.config_file("subscriptionGroup.json")
    assert (after.read_bytes() if after.exists() else b"") == before


async def test_a_pull_with_a_legal_group_name_still_creates_it(broker: Broker) -> None:
    r = await broker.call(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "G_1", "topic": TOPIC, "queueId": "0", "queueOffset": "0"})
    assert r.code == BrokerResponseCode.PULL_NOT_FOUND, r.remark
    assert broker.ctx.store.subscriptions.get("G_1") is not None


@pytest.mark.parametrize("props", [
    "KEYS\x01k\x02user\x01a\x00b\x02", "user\x01line\nbreak\x02", "TAGS\x01a|b\x02"])
async def test_remoting_properties_follow_the_shared_rules(broker: Broker, props: str) -> None:
    code, remark = await _send(broker, 0, props)
    assert code == BrokerResponseCode.MESSAGE_ILLEGAL, remark
    assert _stored(broker) == 0


# ---- consumer offsets -------------------------------------------------------------


@pytest.mark.parametrize(("field", "value"), [
    ("queueId", str(2**70)), ("queueId", "-1"), ("queueId", "4"),
    ("commitOffset", "-1"), ("commitOffset", str(2**63)), ("commitOffset", "x")])
async def test_a_consumer_offset_out_of_range_is_refused_and_not_saved(
        broker: Broker, field: str, value: str) -> None:
    ext = {"consumerGroup": "G", "topic": TOPIC, "queueId": "0", "commitOffset": "5"}
    ext[field] = value
    r = await broker.call(RequestCode.UPDATE_CONSUMER_OFFSET, ext)
    assert r.code == BrokerResponseCode.INVALID_REQUEST
    assert r.remark is not None and field in r.remark
    assert broker.ctx.store.offsets.query_all("G", TOPIC) == {}
    broker.ctx.store.offsets.persist()
    saved = json.loads(broker.config_file("consumerOffset.json").read_text())
    assert saved["offsetTable"] == {}


async def test_a_consumer_offset_in_range_is_saved(broker: Broker) -> None:
    r = await broker.call(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": "G", "topic": TOPIC, "queueId": "3", "commitOffset": str(2**63 - 1)})
    assert r.code == BrokerResponseCode.SUCCESS, r.remark
    assert broker.ctx.store.offsets.query("G", TOPIC, 3) == 2**63 - 1


# ---- topic and group configs --------------------------------------------------------


@pytest.mark.parametrize("perm", [-1, 16, 2**40])
async def test_a_topic_perm_outside_rocketmqs_bits_is_refused(broker: Broker, perm: int) -> None:
    r = await broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": "Other", "readQueueNums": "4", "writeQueueNums": "4", "perm": str(perm)})
    assert r.code == BrokerResponseCode.INVALID_REQUEST
    assert r.remark is not None and "perm" in r.remark
    assert broker.ctx.store.topics.get("Other") is None
    assert "Other" not in broker.config_file("topics.json").read_text()


async def test_a_topic_with_the_priority_bit_is_accepted(broker: Broker) -> None:
    r = await broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": "Other", "readQueueNums": "4", "writeQueueNums": "4", "perm": "14"})
    assert r.code == BrokerResponseCode.SUCCESS, r.remark


@pytest.mark.parametrize(("field", "value"), [
    ("retryQueueNums", -5), ("retryQueueNums", 2**70), ("retryMaxTimes", -2),
    ("brokerId", -1), ("groupName", "../../etc/x\n#evil"), ("groupName", "g" * 256)])
async def test_a_subscription_group_out_of_range_is_refused_and_not_saved(
        broker: Broker, field: str, value: object) -> None:
    body = {"groupName": "G2", field: value}
    r = await broker.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                          body=json.dumps(body).encode())
    assert r.code == BrokerResponseCode.INVALID_REQUEST
    assert r.remark is not None and field in r.remark
    assert broker.ctx.store.subscriptions.get(str(body["groupName"])) is None


async def test_the_store_tables_refuse_out_of_range_entries_themselves(broker: Broker) -> None:
    from mqcluster.store.subscription_group import SubscriptionGroupConfig
    from mqcluster.store.topic_config import TopicConfig

    with pytest.raises(ValueError, match="perm"):
        broker.ctx.store.topics.put(TopicConfig("X", 4, 4, perm=-1))
    with pytest.raises(ValueError, match="retryQueueNums"):
        broker.ctx.store.subscriptions.put(SubscriptionGroupConfig("X", retryQueueNums=-5))
    with pytest.raises(ValueError, match="queueId"):
        broker.ctx.store.offsets.commit("G", TOPIC, 2**70, 1)


# ---- broker permission ---------------------------------------------------------------


async def test_broker_permission_applies_to_remoting_sends_and_pulls(tmp_path: Path) -> None:
    async with remoting_broker(tmp_path / "ro", brokerPermission=4) as ro:
        await _topic(ro)
        code, remark = await _send(ro)
        assert code == BrokerResponseCode.NO_PERMISSION
        assert remark is not None and "brokerPermission" in remark
    async with remoting_broker(tmp_path / "wo", brokerPermission=2) as wo:
        await _topic(wo)
        r = await wo.call(RequestCode.PULL_MESSAGE, {
            "consumerGroup": "G", "topic": TOPIC, "queueId": "0", "queueOffset": "0"})
        assert r.code == BrokerResponseCode.NO_PERMISSION
        assert r.remark is not None and "brokerPermission" in r.remark


def test_offsets_saved_out_of_range_before_the_checks_are_dropped_on_load(
        tmp_path: Path) -> None:
    from mqcluster.store.consumer_offset import ConsumerOffsetManager

    (tmp_path / "consumerOffset.json").write_text(json.dumps({"offsetTable": {
        "T@G": {"0": 5, str(2**70): 1, "1": -3, "2": 2**63}}}))
    offsets = ConsumerOffsetManager(str(tmp_path))
    assert offsets.load()
    assert offsets.query_all("G", "T") == {0: 5}
    assert offsets.dirty
