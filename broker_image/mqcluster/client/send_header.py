"""Headers of the send requests, built without pydantic, and their response.

The fields and spellings are exactly what ``SendMessageRequestHeader(...).to_ext()``
gives (V1 names) or ``v1_to_v2`` of it (SEND_MESSAGE_V2's one-letter names); building
them by hand keeps the per-request cost of the hot path low.
"""

from __future__ import annotations

import re

from mqcluster.broker.protocol import SendMessageResponseHeader
from mqcluster.client.errors import ClientError
from mqcluster.wire.frame import FrameError, RemotingCommand

DEFAULT_TOPIC = "TBW102"
_DECIMAL = re.compile(r"-?[0-9]{1,18}")


def send_header_v1(
    producer_group: str,
    topic: str,
    queue_id: int,
    born_timestamp: int,
    default_queue_nums: int,
    *,
    flag: int = 0,
    properties: str = "",
    batch: bool = False,
) -> dict[str, str]:
    return {
        "producerGroup": producer_group,
        "topic": topic,
        "defaultTopic": DEFAULT_TOPIC,
        "defaultTopicQueueNums": str(default_queue_nums),
        "queueId": str(queue_id),
        "sysFlag": "0",
        "bornTimestamp": str(born_timestamp),
        "flag": str(flag),
        "properties": properties,
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "true" if batch else "false",
    }


def send_header_v2(
    producer_group: str,
    topic: str,
    queue_id: int,
    born_timestamp: int,
    default_queue_nums: int,
    *,
    flag: int = 0,
    properties: str = "",
) -> dict[str, str]:
    return {
        "a": producer_group,
        "b": topic,
        "c": DEFAULT_TOPIC,
        "d": str(default_queue_nums),
        "e": str(queue_id),
        "f": "0",
        "g": str(born_timestamp),
        "h": str(flag),
        "i": properties,
        "j": "0",
        "k": "false",
        "m": "false",
    }


def send_response(addr: str, resp: RemotingCommand) -> SendMessageResponseHeader:
    """The SEND_MESSAGE response header; a missing or bad field raises ClientError.
    The usual answer (decimal numbers, no extra field to check) is read without the
    model's validation; anything else goes through it, for its error message."""
    ext = resp.ext_fields
    msg_id, queue_id, queue_offset = ext.get("msgId"), ext.get("queueId"), ext.get("queueOffset")
    if (msg_id is not None and queue_id is not None and queue_offset is not None
            and _DECIMAL.fullmatch(queue_id) and _DECIMAL.fullmatch(queue_offset)):
        return SendMessageResponseHeader.model_construct(
            msgId=msg_id, queueId=int(queue_id), queueOffset=int(queue_offset),
            transactionId=ext.get("transactionId"))
    try:
        return SendMessageResponseHeader.from_ext(ext)
    except FrameError as exc:
        raise ClientError(f"bad send response from {addr}: {exc}") from exc
