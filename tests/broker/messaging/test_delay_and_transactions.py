from __future__ import annotations

import pytest

from mqcluster.broker.messaging.clock import ManualClock
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.kinds import MessageKind
from mqcluster.broker.messaging.properties import PROPERTY_TIMER_DELIVER_MS
from mqcluster.broker.messaging.send import OutgoingMessage
from mqcluster.broker.messaging.service import MessagingService
from mqcluster.broker.messaging.transaction import CheckRequest
from tests.broker.messaging.helpers import msg, pop, send
from tests.broker.messaging.memory_log import MemoryLog


def delayed(body: bytes, due_ms: int) -> OutgoingMessage:
    return msg(body, kind=MessageKind.DELAY, delivery_timestamp_ms=due_ms)


async def test_delayed_message_released_when_due(
    svc: MessagingService, clock: ManualClock, mlog: MemoryLog
) -> None:
    due = clock.now_ms() + 5000
    [out] = await send(svc, delayed(b"later", due))
    assert out.recall_handle
    assert mlog.bodies("T") == []
    assert await pop(svc) == []
    clock.advance(4999)
    assert await svc.delay.deliver_due() == 0
    clock.advance(1)
    await svc.tick()
    got = await pop(svc)
    assert [d.message.body for d in got] == [b"later"]
    assert got[0].message.properties[PROPERTY_TIMER_DELIVER_MS] == str(due)
    assert svc.delay.pending() == 0


async def test_delayed_messages_released_in_due_order(
    svc: MessagingService, clock: ManualClock
) -> None:
    now = clock.now_ms()
    await send(
        svc,
        delayed(b"c", now + 3000),
        delayed(b"a", now + 1000),
        delayed(b"b", now + 2000),
    )
    clock.advance(3000)
    await svc.tick()
    assert [d.message.body for d in await pop(svc)] == [b"a", b"b", b"c"]


async def test_past_delivery_time_is_immediate(svc: MessagingService, clock: ManualClock) -> None:
    await send(svc, delayed(b"now", clock.now_ms() - 1))
    assert len(await pop(svc)) == 1


async def test_recall_and_restart(
    svc: MessagingService, clock: ManualClock, mlog: MemoryLog
) -> None:
    now = clock.now_ms()
    [a, _] = await send(svc, delayed(b"a", now + 1000),
                        delayed(b"b", now + 1000))
    assert svc.delay.recall(a.recall_handle) == a.message_id
    with pytest.raises(MessagingError):
        svc.delay.recall(a.recall_handle)
    restarted = MessagingService(mlog, svc.config, clock=clock)
    restarted.load()
    assert restarted.delay.pending() == 2
    clock.advance(1000)
    await svc.tick()
    assert mlog.bodies("T") == [b"b"]


async def test_transaction_commit_and_rollback(svc: MessagingService, mlog: MemoryLog) -> None:
    [c, r] = await send(
        svc,
        msg(b"commit", kind=MessageKind.TRANSACTION, message_id="C"),
        msg(b"rollback", kind=MessageKind.TRANSACTION, message_id="R"),
    )
    assert c.transaction_id and r.transaction_id and c.transaction_id != r.transaction_id
    assert await pop(svc) == []
    await svc.transactions.end(c.transaction_id, "C", commit=True)
    await svc.transactions.end(r.transaction_id, "R", commit=False)
    got = await pop(svc)
    assert [(d.message.body, d.message.msg_id) for d in got] == [(b"commit", "C")]
    with pytest.raises(MessagingError) as err:
        await svc.transactions.end(c.transaction_id, "C", commit=True)
    assert err.value.code is Code.INVALID_TRANSACTION_ID
    assert svc.transactions.unresolved() == []


async def test_transaction_check_back_then_rollback_after_max(
    svc: MessagingService, clock: ManualClock, mlog: MemoryLog
) -> None:
    [h] = await send(svc, msg(b"orphan", kind=MessageKind.TRANSACTION))
    checks: list[CheckRequest] = []
    svc.clients.touch("producer-1", clock.now_ms(), topics={"T"})
    svc.clients.attach("producer-1", checks.append)
    from mqcluster.broker.messaging.clients import ClientKind

    svc.clients.touch("producer-1", clock.now_ms(), kind=ClientKind.PRODUCER)
    clock.advance(svc.config.transactionTimeOut - 1)
    await svc.tick()
    assert checks == []
    clock.advance(1)
    await svc.tick()
    assert [(c.transaction_id, c.message.body) for c in checks] == [(h.transaction_id, b"orphan")]
    for _ in range(svc.config.transactionCheckMax + 1):
        clock.advance(svc.config.transactionCheckInterval)
        await svc.tick()
    assert len(checks) == svc.config.transactionCheckMax
    assert svc.transactions.unresolved() == []
    assert mlog.bodies("T") == []


async def test_unresolved_half_messages_survive_restart(
    svc: MessagingService, clock: ManualClock, mlog: MemoryLog
) -> None:
    [a, b] = await send(
        svc, msg(b"a", kind=MessageKind.TRANSACTION), msg(b"b", kind=MessageKind.TRANSACTION)
    )
    await svc.transactions.end(a.transaction_id, a.message_id, commit=False)
    restarted = MessagingService(mlog, svc.config, clock=clock)
    restarted.load()
    assert [h.transaction_id for h in restarted.transactions.unresolved()] == [b.transaction_id]
    await restarted.transactions.end(b.transaction_id, b.message_id, commit=True)
    assert mlog.bodies("T") == [b"b"]
