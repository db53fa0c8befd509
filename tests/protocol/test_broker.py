"""The broker's contracts (mqcluster.protocol.broker): one list of request codes, the
topic admin header."""

from __future__ import annotations

from pathlib import Path

from mqcluster.protocol.broker import (
    BrokerResponseCode,
    CreateTopicRequestHeader,
    RequestCode,
    decode_update_topic,
    encode_update_topic,
)
from mqcluster.wire.frame import FrameDecoder, RemotingCommand, encode_frame
from tests.broker.handlers.harness import remoting_broker


def roundtrip(cmd: RemotingCommand) -> RemotingCommand:
    (out,) = FrameDecoder().feed(encode_frame(cmd))
    return out


def test_update_topic_header() -> None:
    header = CreateTopicRequestHeader(topic="T", readQueueNums=4, writeQueueNums=4, order=True)
    cmd = roundtrip(encode_update_topic(header))
    assert cmd.code == int(RequestCode.UPDATE_AND_CREATE_TOPIC) == 17
    assert cmd.ext_fields["order"] == "true"
    assert cmd.ext_fields["perm"] == "6"
    assert "attributes" not in cmd.ext_fields
    parsed = decode_update_topic(cmd)
    assert parsed == header
    assert parsed.to_topic_config().topicName == "T"
    assert parsed.to_ext() == cmd.ext_fields


def test_codes_are_rocketmqs() -> None:
    assert {c.name: int(c) for c in RequestCode if 25 <= c <= 43 or 203 <= c <= 208} == {
        "UPDATE_BROKER_CONFIG": 25, "GET_BROKER_CONFIG": 26, "GET_BROKER_RUNTIME_INFO": 28,
        "SEARCH_OFFSET_BY_TIMESTAMP": 29, "GET_MAX_OFFSET": 30, "GET_MIN_OFFSET": 31,
        "VIEW_MESSAGE_BY_ID": 33, "GET_ALL_CONSUMER_OFFSET": 43,
        "GET_CONSUMER_CONNECTION_LIST": 203, "GET_PRODUCER_CONNECTION_LIST": 204,
        "DELETE_SUBSCRIPTIONGROUP": 207, "GET_CONSUME_STATS": 208,
    }
    assert BrokerResponseCode.SUBSCRIPTION_PARSE_FAILED == 23


async def test_the_broker_serves_exactly_the_declared_codes(tmp_path: Path) -> None:
    """Every request code a broker's remoting port answers is in RequestCode, and every
    code there is answered: the codes live in one module."""
    async with remoting_broker(tmp_path) as broker:
        served = await broker.served_codes()
    assert served == {int(c) for c in RequestCode}
