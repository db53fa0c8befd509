"""Checks a message must pass before it is appended. (The rules for names, which
both protocols apply, are in ``mqcluster.protocol.names``.)"""

from __future__ import annotations

import functools

from mqcluster.protocol.names import MAX_TOPIC_LENGTH, TOPIC_PATTERN
from mqcluster.store.codec import EncodedParts
from mqcluster.store.config import StoreConfig
from mqcluster.store.message import PutStatus

MAX_PROPERTIES_LENGTH = 0x7FFF


@functools.lru_cache(maxsize=4096)
def topic_problem(topic: str, encoded_length: int) -> str | None:
    if not topic or encoded_length > MAX_TOPIC_LENGTH:
        return f"topic length must be 1..{MAX_TOPIC_LENGTH} bytes"
    if not TOPIC_PATTERN.fullmatch(topic):
        return "topic may only hold letters, digits and %|_-"
    return None


def validate(parts: EncodedParts, config: StoreConfig, segment_size: int) -> tuple[
        PutStatus, str] | None:
    """``None`` when the message may be stored, else the status and a reason."""
    rec = parts.rec
    problem = topic_problem(rec.topic, len(parts.topic))
    if problem is not None:
        return PutStatus.MESSAGE_ILLEGAL, problem
    if rec.queue_id < 0:
        return PutStatus.MESSAGE_ILLEGAL, "negative queue id"
    if len(parts.props) > min(config.maxPropertiesSize, MAX_PROPERTIES_LENGTH):
        return PutStatus.PROPERTIES_SIZE_EXCEEDED, f"properties are {len(parts.props)} bytes"
    if len(rec.body) > config.maxMessageSize:
        return PutStatus.MESSAGE_ILLEGAL, (
            f"body of {len(rec.body)} bytes exceeds maxMessageSize {config.maxMessageSize}")
    if len(parts.born_host) > 255 or len(parts.store_host) > 255:
        return PutStatus.MESSAGE_ILLEGAL, "host string longer than 255 bytes"
    if parts.size + 8 > segment_size:
        return PutStatus.MESSAGE_ILLEGAL, "message larger than a commitlog segment"
    return None
