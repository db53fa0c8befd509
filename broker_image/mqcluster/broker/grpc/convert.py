"""Between ``apache.rocketmq.v2`` protobuf messages and the message service's types."""

from __future__ import annotations

import gzip
import hashlib
import zlib

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from rocketmq.grpc_protocol import definition_pb2 as pb

from mqcluster.broker.grpc.routes import Address, QueueRoute
from mqcluster.broker.messaging import properties as p
from mqcluster.broker.messaging.consume import Delivery
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.filter import FilterKind, parse_filter
from mqcluster.broker.messaging.kinds import MessageKind
from mqcluster.broker.messaging.records import message_id, origin_topic
from mqcluster.broker.messaging.send import OutgoingMessage
from mqcluster.common.crc import crc32
from mqcluster.store.filter import TagFilter
from mqcluster.store.message import StoredMessage

MAX_TIMESTAMP_SECONDS = 253_402_300_799
MIN_MILLIS_READING = 946_684_800_000
"""2000-01-01 in milliseconds: the least seconds value read as milliseconds."""


def timestamp(ms: int) -> Timestamp:
    ts = Timestamp()
    ts.FromMilliseconds(ms)
    return ts


def duration(ms: int) -> Duration:
    d = Duration()
    d.FromMilliseconds(ms)
    return d


def timestamp_ms(ts: Timestamp, what: str) -> int:
    if not 0 <= ts.seconds <= MAX_TIMESTAMP_SECONDS or not 0 <= ts.nanos < 1_000_000_000:
        raise MessagingError(Code.BAD_REQUEST, f"{what} is not a valid timestamp")
    return int(ts.seconds * 1000 + ts.nanos // 1_000_000)


def delivery_timestamp_ms(ts: Timestamp) -> int:
    """The official Python client 5.1.2 documents ``delivery_timestamp`` in milliseconds
    but sends the value as ``Timestamp.seconds``: a seconds value too large to be a
    timestamp that, read as milliseconds, is a time since 2000 is read as milliseconds.
    Anything else out of range (just past year 9999, which as milliseconds would be a
    1970s date and deliver at once) is refused."""
    if ts.seconds > MAX_TIMESTAMP_SECONDS:
        if ts.nanos == 0 and MIN_MILLIS_READING <= ts.seconds <= MAX_TIMESTAMP_SECONDS * 1000:
            return int(ts.seconds)
        raise MessagingError(
            Code.ILLEGAL_DELIVERY_TIME,
            f"delivery_timestamp of {ts.seconds} s is past year 9999, and as milliseconds "
            "it is not a time since 2000")
    if ts.seconds < 0 or not 0 <= ts.nanos < 1_000_000_000:
        raise MessagingError(Code.ILLEGAL_DELIVERY_TIME,
                             "delivery_timestamp is not a valid timestamp")
    return int(ts.seconds * 1000 + ts.nanos // 1_000_000)


def duration_ms(d: Duration, what: str) -> int:
    if d.seconds < 0 or d.nanos < 0 or d.seconds > 10 * 365 * 86400:
        raise MessagingError(Code.BAD_REQUEST, f"{what} is not a valid duration")
    return int(d.seconds * 1000 + d.nanos // 1_000_000)


def endpoints_of(addresses: tuple[Address, ...]) -> pb.Endpoints:
    ep = pb.Endpoints()
    ep.scheme = pb.AddressScheme.IPv4
    for host, port in addresses:
        if not host.replace(".", "").isdigit():
            ep.scheme = pb.AddressScheme.DOMAIN_NAME
        ep.addresses.add(host=host, port=port)
    return ep


def addresses_of(ep: pb.Endpoints) -> tuple[Address, ...]:
    return tuple((a.host, a.port) for a in ep.addresses if a.host and a.port > 0)


def message_queue(route: QueueRoute, namespace: str = "") -> pb.MessageQueue:
    mq = pb.MessageQueue()
    mq.topic.name = route.topic
    mq.topic.resource_namespace = namespace
    mq.id = route.queue_id
    mq.permission = int(route.permission)
    mq.broker.name = route.broker_name
    mq.broker.id = route.broker_id
    mq.broker.endpoints.CopyFrom(endpoints_of(route.endpoints))
    mq.accept_message_types.extend(int(k) for k in route.accept)
    return mq


def filter_of(expr: pb.FilterExpression) -> TagFilter:
    if expr.type == pb.FilterType.SQL:
        return parse_filter(FilterKind.SQL92, expr.expression)
    return parse_filter(FilterKind.TAG, expr.expression)


def _kind(msg: pb.Message) -> MessageKind:
    sp = msg.system_properties
    t = sp.message_type
    if t == pb.MessageType.MESSAGE_TYPE_UNSPECIFIED:
        if sp.HasField("message_group"):
            return MessageKind.FIFO
        if sp.HasField("delivery_timestamp"):
            return MessageKind.DELAY
        return MessageKind.NORMAL
    if t in (pb.MessageType.LITE, pb.MessageType.PRIORITY):
        raise MessagingError(Code.UNSUPPORTED,
                             f"{pb.MessageType.Name(t)} messages are not supported by this broker")
    if t not in MessageKind._value2member_map_:
        raise MessagingError(Code.BAD_REQUEST, f"unknown message type {t}")
    kind = MessageKind(t)
    if kind is MessageKind.FIFO and not sp.HasField("message_group"):
        raise MessagingError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                             "a FIFO message needs a message group")
    if kind is MessageKind.DELAY and not sp.HasField("delivery_timestamp"):
        raise MessagingError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                             "a DELAY message needs a delivery timestamp")
    return kind


def _checked_body(msg: pb.Message) -> bytes:
    sp = msg.system_properties
    body = msg.body
    digest = sp.body_digest
    if digest.type != pb.DigestType.DIGEST_TYPE_UNSPECIFIED:
        if digest.type == pb.DigestType.CRC32:
            actual = format(crc32(body) & 0xFFFFFFFF, "08X")
        elif digest.type == pb.DigestType.MD5:
            actual = hashlib.md5(body).hexdigest().upper()
        else:
            actual = hashlib.sha1(body).hexdigest().upper()
        if actual != digest.checksum.upper():
            raise MessagingError(Code.MESSAGE_CORRUPTED, "message body does not match its digest")
    if sp.body_encoding == pb.Encoding.GZIP:
        try:
            raw = gzip.decompress(body) if body[:2] == b"\x1f\x8b" else zlib.decompress(body)
            return bytes(raw)
        except (OSError, zlib.error, EOFError) as exc:
            raise MessagingError(Code.MESSAGE_CORRUPTED,
                                 "message body is not valid gzip/zlib data") from exc
    return bytes(body)


def outgoing(msg: pb.Message) -> OutgoingMessage:
    """A producer's message; raises MessagingError for what RocketMQ would refuse."""
    sp = msg.system_properties
    return OutgoingMessage(
        topic=msg.topic.name,
        body=_checked_body(msg),
        kind=_kind(msg),
        tag=sp.tag if sp.HasField("tag") else None,
        keys=list(sp.keys),
        user_properties=dict(msg.user_properties),
        message_id=sp.message_id or None,
        born_timestamp_ms=timestamp_ms(sp.born_timestamp, "born_timestamp"),
        born_host=sp.born_host,
        message_group=sp.message_group if sp.HasField("message_group") else None,
        delivery_timestamp_ms=(delivery_timestamp_ms(sp.delivery_timestamp)
                               if sp.HasField("delivery_timestamp") else None),
        trace_context=sp.trace_context if sp.HasField("trace_context") else None,
    )


def _stored_kind(msg: StoredMessage) -> int:
    if p.PROPERTY_MSG_GROUP in msg.properties:
        return int(MessageKind.FIFO)
    if p.PROPERTY_TIMER_DELIVER_MS in msg.properties:
        return int(MessageKind.DELAY)
    if p.PROPERTY_TRANSACTION_PREPARED in msg.properties:
        return int(MessageKind.TRANSACTION)
    return int(MessageKind.NORMAL)


def user_properties(msg: StoredMessage) -> dict[str, str]:
    return {k: v for k, v in msg.properties.items()
            if k not in p.SYSTEM_PROPERTIES and not k.startswith("__")}


def stored_message(msg: StoredMessage, topic: str | None = None,
                   namespace: str = "") -> pb.Message:
    """A stored message as a consumer (or a transaction checker) sees it."""
    out = pb.Message()
    out.topic.name = topic or origin_topic(msg)
    out.topic.resource_namespace = namespace
    out.body = msg.body
    for k, v in user_properties(msg).items():
        out.user_properties[k] = v
    sp = out.system_properties
    if msg.tags:
        sp.tag = msg.tags
    sp.keys.extend(k for k in msg.keys if k)
    sp.message_id = message_id(msg)
    sp.body_digest.type = pb.DigestType.CRC32
    sp.body_digest.checksum = format(crc32(msg.body) & 0xFFFFFFFF, "08X")
    sp.body_encoding = pb.Encoding.IDENTITY
    sp.message_type = _stored_kind(msg)
    sp.born_timestamp.CopyFrom(timestamp(msg.born_timestamp))
    sp.born_host = msg.born_host
    if msg.store_timestamp:
        sp.store_timestamp.CopyFrom(timestamp(msg.store_timestamp))
    sp.store_host = msg.store_host
    deliver = msg.properties.get(p.PROPERTY_TIMER_DELIVER_MS, "")
    if deliver.isdigit():
        sp.delivery_timestamp.CopyFrom(timestamp(int(deliver)))
    sp.queue_id = msg.queue_id
    sp.queue_offset = msg.queue_offset
    group = msg.properties.get(p.PROPERTY_MSG_GROUP)
    if group:
        sp.message_group = group
    trace = msg.properties.get(p.PROPERTY_TRACE_CONTEXT)
    if trace:
        sp.trace_context = trace
    return out


def delivered_message(d: Delivery, namespace: str = "") -> pb.Message:
    out = stored_message(d.message, d.topic, namespace)
    sp = out.system_properties
    sp.receipt_handle = d.receipt.encode()
    sp.queue_id = d.receipt.queue_id
    sp.queue_offset = d.receipt.offset
    sp.invisible_duration.CopyFrom(duration(d.invisible_ms))
    sp.delivery_attempt = d.attempt
    return out


def status(code: Code | int, message: str = "") -> pb.Status:
    c = int(code)
    return pb.Status(code=c, message=message or pb.Code.Name(c))


def error_status(exc: MessagingError) -> pb.Status:
    return status(exc.code, exc.message)
