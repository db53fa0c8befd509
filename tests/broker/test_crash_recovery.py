"""SIGKILL the broker during a SYNC_FLUSH write load; every acknowledged message survives.

Senders use ``retries=0`` so each message is sent at most once: after the
restart every acknowledged message must be there exactly once, at the queue
and offset it was acknowledged with, and no message may appear twice.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from mqcluster.client import AdminClient, ClientError, Message, Producer, PullConsumer, SendResult
from mqcluster.client.message import PullStatus
from mqcluster_testing.broker.procs import start_broker

pytestmark = pytest.mark.slow

TOPIC = "CrashTopic"
QUEUES = 4
SENDERS = 8
KILL_AFTER_ACKS = 400


async def sender(
    addr: str, n: int, acked: dict[str, SendResult], enough: asyncio.Event, dead: asyncio.Event
) -> None:
    async with Producer(f"crash-{n}", broker_addr=addr, retries=0, timeout=10) as producer:
        i = 0
        while not dead.is_set():
            msg = Message(TOPIC, f"{n}-{i}".encode() * 16, keys=[f"{n}-{i}"])
            i += 1
            try:
                result = await producer.send(msg)
            except ClientError:
                return
            acked[result.msg_id] = result
            if len(acked) >= KILL_AFTER_ACKS:
                enough.set()


async def pull_all(addr: str) -> list[tuple[int, int, str, str]]:
    """(queue id, queue offset, msg id, key) of every stored message, checking each queue."""
    out = []
    async with PullConsumer("audit", broker_addr=addr) as consumer:
        for queue in await consumer.queues(TOPIC):
            offset, last_physical = 0, -1
            while True:
                res = await consumer.pull(queue, offset, max_nums=256)
                if res.status is not PullStatus.FOUND:
                    assert res.status is PullStatus.NO_NEW_MSG, res
                    assert offset == res.max_offset
                    break
                for m in res.messages:
                    assert m.queue_id == queue.queue_id
                    assert m.queue_offset == offset, "consume queue has a gap or a repeat"
                    assert m.commitlog_offset > last_physical, "consume queue out of order"
                    assert m.body == m.keys[0].encode() * 16, "entry points at a wrong message"
                    last_physical = m.commitlog_offset
                    out.append((m.queue_id, m.queue_offset, m.msg_id, m.keys[0]))
                    offset += 1
                assert res.next_begin_offset == offset
    return out


async def test_acknowledged_messages_survive_sigkill(tmp_path: Path) -> None:
    broker = await start_broker(tmp_path, flushDiskType="SYNC_FLUSH")
    try:
        async with AdminClient(broker_addr=broker.addr) as admin:
            await admin.create_topic(TOPIC, queue_nums=QUEUES)
        acked: dict[str, SendResult] = {}
        enough, dead = asyncio.Event(), asyncio.Event()
        tasks = [
            asyncio.create_task(sender(broker.addr, n, acked, enough, dead)) for n in range(SENDERS)
        ]
        await asyncio.wait_for(enough.wait(), 120)
        await broker.kill()
        dead.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        acked_at_kill = dict(acked)

        await broker.restart()
        stored = await pull_all(broker.addr)
    finally:
        await broker.kill()

    counts = Counter(msg_id for _, _, msg_id, _ in stored)
    duplicated = [k for k, c in counts.items() if c > 1]
    assert not duplicated, f"{len(duplicated)} messages stored twice"
    where = {msg_id: (qid, off) for qid, off, msg_id, _ in stored}
    lost = [k for k in acked_at_kill if k not in where]
    assert not lost, f"{len(lost)} of {len(acked_at_kill)} acknowledged messages lost"
    for msg_id, result in acked_at_kill.items():
        assert where[msg_id] == (result.queue.queue_id, result.queue_offset)
    assert len(acked_at_kill) >= KILL_AFTER_ACKS
    assert_sender_order(stored)


def assert_sender_order(stored: list[tuple[int, int, str, str]]) -> None:
    """Each sender waits for an answer before its next send: a queue holds its messages in order."""
    last: dict[tuple[int, str], int] = {}
    for qid, _offset, _msg_id, msg_key in stored:
        sender_id, seq = msg_key.split("-")
        key = (qid, sender_id)
        assert last.get(key, -1) < int(seq), f"sender {sender_id} reordered in queue {qid}"
        last[key] = int(seq)
