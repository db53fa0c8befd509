"""Building store records from stored messages: retry copies, dead letters, releases."""

from __future__ import annotations

from mqcluster.broker.messaging import properties as p
from mqcluster.broker.messaging.store_port import MessageLog
from mqcluster.store.message import MessageRecord, StoredMessage


def reconsume_times(msg: StoredMessage) -> int:
    raw = msg.properties.get(p.PROPERTY_RECONSUME_TIME)
    if raw is not None and raw.isdigit():
        return int(raw)
    return msg.reconsume_times


def origin_topic(msg: StoredMessage) -> str:
    """The topic a consumer subscribed to, for a message read from a retry topic."""
    return msg.properties.get(p.PROPERTY_RETRY_TOPIC) or msg.topic


def message_id(msg: StoredMessage) -> str:
    return msg.properties.get(p.PROPERTY_UNIQ_KEY) or msg.msg_id


def copy_record(msg: StoredMessage, topic: str, queue_id: int,
                properties: dict[str, str] | None = None,
                drop: tuple[str, ...] = ()) -> MessageRecord:
    props = {k: v for k, v in msg.properties.items() if k not in drop}
    props.setdefault(p.PROPERTY_UNIQ_KEY, message_id(msg))
    if properties:
        props.update(properties)
    return MessageRecord(
        topic=topic,
        queue_id=queue_id,
        body=msg.body,
        tags=msg.tags,
        keys=list(msg.keys),
        properties=props,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        flag=msg.flag,
        reconsume_times=int(props.get(p.PROPERTY_RECONSUME_TIME, msg.reconsume_times)),
    )


def retry_record(msg: StoredMessage, retry_topic: str, next_reconsume: int) -> MessageRecord:
    return copy_record(msg, retry_topic, 0, {
        p.PROPERTY_RETRY_TOPIC: origin_topic(msg),
        p.PROPERTY_RECONSUME_TIME: str(next_reconsume),
        p.PROPERTY_ORIGIN_MESSAGE_ID: message_id(msg),
    })


def dead_letter_record(msg: StoredMessage, dlq_topic: str, reconsume: int) -> MessageRecord:
    return copy_record(msg, dlq_topic, 0, {
        p.PROPERTY_DLQ_ORIGIN_TOPIC: origin_topic(msg),
        p.PROPERTY_DLQ_ORIGIN_MESSAGE_ID: message_id(msg),
        p.PROPERTY_RECONSUME_TIME: str(reconsume),
    }, drop=(p.PROPERTY_RETRY_TOPIC,))


def release_record(msg: StoredMessage, drop: tuple[str, ...] = ()) -> MessageRecord:
    """The message a delayed or half message becomes on its real topic and queue."""
    topic = msg.properties.get(p.PROPERTY_REAL_TOPIC, msg.topic)
    qid_raw = msg.properties.get(p.PROPERTY_REAL_QUEUE_ID, "0")
    qid = int(qid_raw) if qid_raw.isdigit() else 0
    return copy_record(msg, topic, qid, drop=(p.PROPERTY_REAL_TOPIC, p.PROPERTY_REAL_QUEUE_ID,
                                               *drop))


def read_one(log: MessageLog, topic: str, queue_id: int, offset: int) -> StoredMessage | None:
    """The message at exactly ``offset`` of a queue, or None when it is gone."""
    res = log.get_messages(topic, queue_id, offset, 1)
    for m in res.messages:
        if m.queue_offset == offset:
            return m
    return None
