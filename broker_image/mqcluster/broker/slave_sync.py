"""A slave keeps copies of its master's metadata (RocketMQ's SlaveSynchronize).

Topics, subscription groups and consumer offsets live in JSON files beside the
commitlog, not in it, so the HA stream does not carry them. A slave reads them from
its master every few seconds; a slave elected master then knows the topics and where
each consumer group was (at most one interval behind: consumers see a few messages
again, never miss one).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from mqcluster.broker.acl_gate import inner_credentials
from mqcluster.broker.context import BrokerContext
from mqcluster.client.broker_api import BrokerApi
from mqcluster.protocol.broker import RequestCode
from mqcluster.wire.frame import RemotingCommand

log = logging.getLogger(__name__)


async def _fetch(api: BrokerApi, addr: str, code: int) -> dict[str, Any]:
    resp = await api.call(addr, RemotingCommand.request(code))
    data = json.loads(resp.body or b"{}")
    if not isinstance(data, dict):
        raise ValueError(f"request {code} answered {type(data).__name__}, not an object")
    return data


async def sync_from_master(ctx: BrokerContext, api: BrokerApi) -> None:
    """One round: copy the master's topics, groups and consumer offsets, if changed."""
    role = ctx.role
    if role.is_master or not role.master_addr:
        return
    store = ctx.store
    addr = role.master_addr
    topics = await _fetch(api, addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    if topics.get("topicConfigTable") is not None and topics != store.topics.encode():
        store.topics.decode(topics)
        store.topics.persist()
        ctx.topics_changed()
    groups = await _fetch(api, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    if groups and groups != store.subscriptions.encode():
        store.subscriptions.decode(groups)
        store.subscriptions.persist()
    offsets = await _fetch(api, addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
    if offsets.get("offsetTable") is not None and offsets != store.offsets.encode():
        store.offsets.decode(offsets)
        store.offsets.dirty = True


class MetadataSync:
    """``sync_from_master`` every ``interval_ms`` while started: what a replica that is
    not the master runs in DLedger and master-slave modes (controller mode's
    ReplicasManager runs the same round on its own schedule)."""

    def __init__(self, ctx: BrokerContext, interval_ms: int) -> None:
        self.ctx = ctx
        self.interval = interval_ms / 1000
        self.api = BrokerApi(timeout=1.0, credentials=inner_credentials(ctx.config))
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="slave-sync")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await sync_from_master(self.ctx, self.api)
            except Exception as exc:  # the master restarting or moving: next round
                log.debug("metadata sync from the master failed: %s", exc)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.api.close()
