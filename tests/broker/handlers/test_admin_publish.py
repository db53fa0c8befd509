"""An admin topic change answers only after the name servers were sent it (RocketMQ's
updateAndCreateTopic registers before answering), and a silent name server cannot hold
the answer past registerBrokerTimeoutMills."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mqcluster.protocol.broker import BrokerResponseCode, RequestCode
from tests.broker.handlers.harness import remoting_broker

CREATE = {"topic": "Published", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6"}


async def test_create_and_delete_answer_after_the_topics_are_published(tmp_path: Path) -> None:
    async with remoting_broker(tmp_path / "store") as b:
        published: list[set[str]] = []

        async def publish() -> None:
            await asyncio.sleep(0)  # a registration round takes at least one turn of the loop
            published.append(set(b.ctx.store.topics.table))

        b.ctx.topic_publishers.append(publish)
        r = await b.call(RequestCode.UPDATE_AND_CREATE_TOPIC, CREATE)
        assert r.code == BrokerResponseCode.SUCCESS, r.remark
        assert published and "Published" in published[-1]

        r = await b.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Published"})
        assert r.code == BrokerResponseCode.SUCCESS, r.remark
        assert len(published) == 2 and "Published" not in published[-1]


async def test_a_silent_name_server_delays_the_answer_only_until_the_timeout(
        tmp_path: Path) -> None:
    async with remoting_broker(tmp_path / "store", registerBrokerTimeoutMills=50) as b:
        never = asyncio.Event()

        async def silent() -> None:
            await never.wait()

        b.ctx.topic_publishers.append(silent)
        r = await asyncio.wait_for(b.call(RequestCode.UPDATE_AND_CREATE_TOPIC, CREATE), 30)
        assert r.code == BrokerResponseCode.SUCCESS, r.remark
        assert "Published" in b.ctx.store.topics.table
