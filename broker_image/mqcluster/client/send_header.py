"""Headers of the send requests, built by hand, and their response.

The fields and spellings are exactly what ``SendMessageRequestHeader(...).to_ext()``
gives (V1 names) or ``v1_to_v2`` of it (SEND_MESSAGE_V2's one-letter names); building
them by hand keeps the per-request cost of the hot path low.
"""

from __future__ import annotations

from mqcluster.broker.protocol import SendMessageResponseHeader
from mqcluster.client.errors import ClientError
from mqcluster.wire.frame import FrameError, RemotingCommand

DEFAULT_TOPIC = "TBW102"


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
    """The SEND_MESSAGE response header; a missing or bad field raises ClientError."""
    try:
        return SendMessageResponseHeader.from_ext(resp.ext_fields)
    except FrameError as exc:
        raise ClientError(f"bad send response from {addr}: {exc}") from exc
