from __future__ import annotations

from mqcluster.broker.messaging.consume import Delivery, PopRequest
from mqcluster.broker.messaging.filter import MATCH_ALL
from mqcluster.broker.messaging.kinds import MessageKind
from mqcluster.broker.messaging.send import OutgoingMessage, SendOutcome
from mqcluster.broker.messaging.service import MessagingService
from mqcluster.store.filter import TagFilter


def msg(body: bytes, topic: str = "T", **kw: object) -> OutgoingMessage:
    return OutgoingMessage(topic=topic, body=body, **kw)  # type: ignore[arg-type]


async def send(svc: MessagingService, *messages: OutgoingMessage) -> list[SendOutcome]:
    out = await svc.send(list(messages))
    for o in out:
        assert o.ok, o
    return out


async def pop(
    svc: MessagingService,
    group: str = "g",
    topic: str = "T",
    queue_id: int = 0,
    batch: int = 32,
    invisible_ms: int = 10_000,
    filter: TagFilter = MATCH_ALL,
) -> list[Delivery]:
    return await svc.receive(
        PopRequest(group, topic, queue_id, filter, batch, invisible_ms), long_polling_ms=0
    )


def fifo(body: bytes, group: str, topic: str = "T") -> OutgoingMessage:
    return OutgoingMessage(topic=topic, body=body, kind=MessageKind.FIFO, message_group=group)
