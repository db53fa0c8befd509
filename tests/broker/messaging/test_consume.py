from __future__ import annotations

import pytest

from mqcluster.broker.messaging.clock import ManualClock
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.filter import FilterKind, parse_filter
from mqcluster.broker.messaging.properties import (
    PROPERTY_DLQ_ORIGIN_TOPIC,
    PROPERTY_RETRY_TOPIC,
)
from mqcluster.broker.messaging.service import MessagingService
from mqcluster.store.subscription_group import SubscriptionGroupConfig
from tests.broker.messaging.helpers import fifo, msg, pop, send
from tests.broker.messaging.memory_log import MemoryLog


async def test_receive_and_ack_keeps_message_fields(svc: MessagingService, mlog: MemoryLog) -> None:
    out = await send(
        svc,
        msg(
            b"one",
            tag="TagA",
            keys=["k1", "k2"],
            user_properties={"color": "red"},
            message_id="MID-1",
        ),
    )
    assert out[0].message_id == "MID-1"
    got = await pop(svc)
    assert len(got) == 1
    d = got[0]
    assert d.message.body == b"one"
    assert d.message.tags == "TagA"
    assert d.message.keys == ["k1", "k2"]
    assert d.message.properties["color"] == "red"
    assert d.message.msg_id == "MID-1"
    assert d.attempt == 1
    assert d.topic == "T"
    await svc.consume.ack("g", d.receipt.encode())
    assert mlog.offsets.query("g", "T", 0) == 1
    assert await pop(svc) == []


async def test_server_generates_message_id_when_absent(svc: MessagingService) -> None:
    a, b = await send(svc, msg(b"x"), msg(b"y"))
    assert len(a.message_id) == 34 and a.message_id != b.message_id


async def test_unacked_message_is_redelivered_through_retry_topic(
    svc: MessagingService, clock: ManualClock, mlog: MemoryLog
) -> None:
    await send(svc, msg(b"m", message_id="ID"))
    first = (await pop(svc, invisible_ms=5000))[0]
    clock.advance(4999)
    assert await pop(svc, invisible_ms=5000) == []
    clock.advance(1)
    again = await pop(svc, invisible_ms=5000)
    assert len(again) == 1
    second = again[0]
    assert second.message.body == b"m" and second.topic == "T"
    assert second.message.msg_id == "ID"
    assert second.attempt == 2
    assert second.receipt.topic == "%RETRY%g"
    assert second.message.properties[PROPERTY_RETRY_TOPIC] == "T"
    with pytest.raises(MessagingError) as err:
        await svc.consume.ack("g", first.receipt.encode())
    assert err.value.code is Code.INVALID_RECEIPT_HANDLE
    await svc.consume.ack("g", second.receipt.encode())
    assert mlog.offsets.query("g", "T", 0) == 1
    assert mlog.offsets.query("g", "%RETRY%g", 0) == 1
    clock.advance(60_000)
    assert await pop(svc) == []


async def test_background_revive_without_receive(
    svc: MessagingService, clock: ManualClock, mlog: MemoryLog
) -> None:
    await send(svc, msg(b"m"))
    await pop(svc, invisible_ms=2000)
    clock.advance(2000)
    await svc.tick()
    assert mlog.bodies("%RETRY%g") == [b"m"]


async def test_dead_letter_after_max_attempts(
    svc: MessagingService, clock: ManualClock, mlog: MemoryLog
) -> None:
    mlog.subscriptions.put(SubscriptionGroupConfig("g", retryMaxTimes=2))
    await send(svc, msg(b"poison", message_id="P"))
    attempts = []
    for _ in range(5):
        got = await pop(svc, invisible_ms=1000)
        attempts += [d.attempt for d in got]
        clock.advance(1000)
    await svc.tick()
    assert attempts == [1, 2, 3]
    dlq = mlog.queues[("%DLQ%g", 0)]
    assert [m.body for m in dlq] == [b"poison"]
    assert dlq[0].properties[PROPERTY_DLQ_ORIGIN_TOPIC] == "T"
    assert dlq[0].msg_id == "P"
    assert await pop(svc) == []


async def test_change_invisible_duration(svc: MessagingService, clock: ManualClock) -> None:
    await send(svc, msg(b"m"))
    d = (await pop(svc, invisible_ms=2000))[0]
    renewed = await svc.consume.change_invisible("g", d.receipt.encode(), 10_000)
    clock.advance(5000)
    assert await pop(svc, invisible_ms=2000) == []
    with pytest.raises(MessagingError) as err:
        await svc.consume.ack("g", d.receipt.encode())
    assert err.value.code is Code.INVALID_RECEIPT_HANDLE
    await svc.consume.ack("g", renewed.encode())


async def test_nack_by_short_invisible_redelivers_soon(
    svc: MessagingService, clock: ManualClock
) -> None:
    await send(svc, msg(b"m"))
    d = (await pop(svc, invisible_ms=30_000))[0]
    await svc.consume.change_invisible("g", d.receipt.encode(), 1000)
    clock.advance(1000)
    again = await pop(svc)
    assert [x.attempt for x in again] == [2]


async def test_groups_consume_independently(svc: MessagingService) -> None:
    await send(svc, msg(b"m"))
    assert len(await pop(svc, group="g1")) == 1
    assert len(await pop(svc, group="g2")) == 1


async def test_fifo_group_gating_and_in_place_redelivery(
    svc: MessagingService, clock: ManualClock, mlog: MemoryLog
) -> None:
    mlog.subscriptions.put(SubscriptionGroupConfig("g", consumeMessageOrderly=True))
    await send(svc, fifo(b"a1", "A"), fifo(b"a2", "A"), fifo(b"b1", "B"))
    first = await pop(svc, batch=1, invisible_ms=5000)
    assert [d.message.body for d in first] == [b"a1"]
    second = await pop(svc, invisible_ms=5000)
    assert [d.message.body for d in second] == [b"b1"]
    assert await pop(svc) == []
    clock.advance(5000)
    third = await pop(svc, batch=1, invisible_ms=5000)
    assert [(d.message.body, d.attempt) for d in third] == [(b"a1", 2)]
    assert third[0].receipt.topic == "T"
    await svc.consume.ack("g", third[0].receipt.encode())
    fourth = await pop(svc, invisible_ms=5000)
    assert [d.message.body for d in fourth] == [b"a2", b"b1"]
    assert ("%RETRY%g", 0) not in mlog.queues


async def test_fifo_batch_keeps_group_order(svc: MessagingService, mlog: MemoryLog) -> None:
    mlog.subscriptions.put(SubscriptionGroupConfig("g", consumeMessageOrderly=True))
    await send(svc, *[fifo(f"{g}{i}".encode(), g) for i in range(3) for g in "AB"])
    got = await pop(svc)
    bodies = [d.message.body for d in got]
    assert [b for b in bodies if b.startswith(b"A")] == [b"A0", b"A1", b"A2"]
    assert [b for b in bodies if b.startswith(b"B")] == [b"B0", b"B1", b"B2"]
    await send(svc, fifo(b"A3", "A"), fifo(b"C0", "C"))
    assert [d.message.body for d in await pop(svc)] == [b"C0"]


async def test_tag_filter(svc: MessagingService, mlog: MemoryLog) -> None:
    await send(svc, msg(b"1", tag="a"), msg(b"2", tag="b"), msg(b"3", tag="c"), msg(b"4"))
    got = await pop(svc, filter=parse_filter(FilterKind.TAG, "a || c"))
    assert [d.message.body for d in got] == [b"1", b"3"]
    for d in got:
        await svc.consume.ack("g", d.receipt.encode())
    assert mlog.offsets.query("g", "T", 0) == 4


def test_filter_expressions() -> None:
    assert parse_filter(FilterKind.TAG, "*").matches_all
    assert parse_filter(FilterKind.TAG, "").matches_all
    assert parse_filter(FilterKind.TAG, " a ||b ").tags == frozenset({"a", "b"})
    with pytest.raises(MessagingError) as err:
        parse_filter(FilterKind.SQL92, "a > 1")
    assert err.value.code is Code.UNSUPPORTED
    for bad in ("a ||", "a | b", "|| b"):
        with pytest.raises(MessagingError) as err:
            parse_filter(FilterKind.TAG, bad)
        assert err.value.code is Code.ILLEGAL_FILTER_EXPRESSION


async def test_retry_copies_only_go_to_receivers_of_their_topic(
    svc: MessagingService, clock: ManualClock
) -> None:
    await send(svc, msg(b"t1"), msg(b"t2", topic="T2"))
    await pop(svc, invisible_ms=1000)
    await pop(svc, topic="T2", queue_id=0, invisible_ms=1000)
    await pop(svc, topic="T2", queue_id=1, invisible_ms=1000)
    clock.advance(1000)
    await svc.tick()
    t2 = await pop(svc, topic="T2", queue_id=1)
    assert [d.message.body for d in t2] == [b"t2"]
    t1 = await pop(svc, topic="T")
    assert [d.message.body for d in t1] == [b"t1"]


async def test_bad_receipt_handles(svc: MessagingService) -> None:
    await send(svc, msg(b"m"))
    d = (await pop(svc))[0]
    good = d.receipt.encode()
    for bad in ("", "garbage", good[:-3], good.replace("~0~", "~9~", 1), good + "x"):
        with pytest.raises(MessagingError) as err:
            await svc.consume.ack("g", bad)
        assert err.value.code is Code.INVALID_RECEIPT_HANDLE
    with pytest.raises(MessagingError) as err:
        await svc.consume.ack("other", good)
    assert err.value.code is Code.INVALID_RECEIPT_HANDLE
    await svc.consume.ack("g", good)


async def test_forward_to_dead_letter(svc: MessagingService, mlog: MemoryLog) -> None:
    await send(svc, msg(b"m"))
    d = (await pop(svc))[0]
    await svc.consume.forward_to_dead_letter("g", d.receipt.encode())
    assert mlog.bodies("%DLQ%g") == [b"m"]
    assert mlog.offsets.query("g", "T", 0) == 1


async def test_invisible_time_bounds(svc: MessagingService) -> None:
    with pytest.raises(MessagingError) as err:
        await pop(svc, invisible_ms=10)
    assert err.value.code is Code.ILLEGAL_INVISIBLE_TIME


async def test_progress_survives_restart(
    svc: MessagingService, mlog: MemoryLog, clock: ManualClock
) -> None:
    await send(svc, msg(b"1"), msg(b"2"))
    d = (await pop(svc, batch=1))[0]
    await svc.consume.ack("g", d.receipt.encode())
    svc2 = MessagingService(mlog, svc.config, clock=clock)
    svc2.load()
    assert [x.message.body for x in await pop(svc2)] == [b"2"]


async def test_auto_renew_while_owner_is_alive(svc: MessagingService, clock: ManualClock) -> None:
    from mqcluster.broker.messaging.consume import PopRequest
    from mqcluster.broker.messaging.filter import MATCH_ALL

    await send(svc, msg(b"m"))
    svc.clients.touch("push-1", clock.now_ms())
    req = PopRequest("g", "T", 0, MATCH_ALL, 8, 60_000, owner="push-1")
    [d] = await svc.receive(req, long_polling_ms=0)
    for _ in range(60):
        clock.advance(5_000)
        svc.clients.touch("push-1", clock.now_ms())
        await svc.tick()
        assert await pop(svc) == []
    await svc.consume.ack("g", d.receipt.encode())


async def test_no_renewal_after_owner_terminates(svc: MessagingService,
                                                 clock: ManualClock) -> None:
    from mqcluster.broker.messaging.consume import PopRequest
    from mqcluster.broker.messaging.filter import MATCH_ALL

    await send(svc, msg(b"m"))
    svc.clients.touch("push-1", clock.now_ms())
    await svc.receive(PopRequest("g", "T", 0, MATCH_ALL, 8, 60_000, owner="push-1"), 0)
    clock.advance(55_000)
    await svc.tick()
    svc.clients.remove("push-1")
    clock.advance(60_000)
    await svc.tick()
    assert [d.attempt for d in await pop(svc)] == [2]


async def test_receive_covers_every_queue_of_the_topic(svc: MessagingService) -> None:
    outs = await send(svc, *[msg(f"{i}".encode(), topic="T2") for i in range(4)])
    assert {o.queue_id for o in outs} == {0, 1}
    got = await pop(svc, topic="T2", queue_id=0)
    assert sorted(d.message.body for d in got) == [b"0", b"1", b"2", b"3"]
    assert await pop(svc, topic="T2", queue_id=-1) == []


async def test_failed_revive_is_retried(svc: MessagingService, clock: ManualClock,
                                        mlog: MemoryLog) -> None:
    from mqcluster.store.message import PutStatus

    await send(svc, msg(b"m"))
    await pop(svc, invisible_ms=1000)
    clock.advance(1000)
    mlog.fail_next = PutStatus.OS_PAGE_CACHE_BUSY
    await svc.tick()
    assert ("%RETRY%g", 0) not in mlog.queues
    await svc.tick()
    assert mlog.bodies("%RETRY%g") == [b"m"]
    assert [d.attempt for d in await pop(svc)] == [2]


async def test_a_master_taking_over_again_delivers_from_the_committed_offset(
    svc: MessagingService, clock: ManualClock, mlog: MemoryLog
) -> None:
    # Held by this broker while it led before; the answer never reached the consumer,
    # and another master led meanwhile. Its old hold must not stall the FIFO group.
    mlog.subscriptions.put(SubscriptionGroupConfig("g", consumeMessageOrderly=True))
    await send(svc, fifo(b"a1", "A"), fifo(b"a2", "A"))
    assert [d.message.body for d in await pop(svc, batch=1, invisible_ms=300_000)] == [b"a1"]
    assert await pop(svc) == []
    svc.took_over()
    again = await pop(svc, invisible_ms=5000)
    assert [d.message.body for d in again] == [b"a1", b"a2"]
    for d in again:
        await svc.consume.ack("g", d.receipt.encode())
    assert svc.consume.committed_offset("g", "T", 0) == 2
