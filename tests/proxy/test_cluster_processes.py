"""One ``mqproxy`` in front of two controller-mode groups, with the official client.

The client sees one endpoint: its sends spread over both groups, its consumer receives
from both and its acks reach the group each message came from, transactions end in
the group that holds them. A group whose master hangs gets no more sends and its
calls fail fast: the client keeps sending through the other group."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from rocketmq import (
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)

from mqcluster.proxy.tokens import receipt_group
from mqcluster_testing.procs import free_addr
from mqcluster_testing.proxy.cluster import GroupsCluster
from tests.broker.grpc.client_util import client_config, new_message
from tests.ha.test_processes import History, produce, wait_acks

pytestmark = pytest.mark.slow

TOPIC = "FailoverTopic"  # the topic tests.ha.test_processes.produce sends to


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[GroupsCluster, str, str]]:
    c = GroupsCluster(tmp_path, groups=2, replicas=2)
    try:
        await c.start()
        await c.wait_in_sync()
        metrics = free_addr()
        proxy = await c.start_proxy(metricsPromExporterPort=metrics.rpartition(":")[2])
        yield c, proxy.addr, f"http://{proxy.addr.rpartition(':')[0]}:{metrics.rpartition(':')[2]}"
    except BaseException:
        print(c.logs())
        raise
    finally:
        await c.close()


def consume_all(endpoint: str, want: set[str], timeout: float = 60) -> dict[str, str]:
    """message id -> group of its receipt handle, for every wanted id; each acked."""
    c = SimpleConsumer(client_config(endpoint), "ProxyGroup", {TOPIC: FilterExpression("*")},
                       await_duration=1)
    c.startup()
    got: dict[str, str] = {}
    try:
        give_up = time.monotonic() + timeout
        while not want <= set(got) and time.monotonic() < give_up:
            try:
                for m in c.receive(32, 15):
                    got[m.message_id] = receipt_group(m.receipt_handle)
                    c.ack(m)
            except Exception:
                time.sleep(0.05)
    finally:
        c.shutdown()
    return got


def health(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:
        body: dict[str, Any] = json.loads(resp.read())
        return body


async def test_one_endpoint_for_every_group(cluster: tuple[GroupsCluster, str, str]) -> None:
    c, endpoint, url = cluster
    body = await asyncio.to_thread(health, url)
    assert body["status"] == "UP" and set(body["groups"]) == set(c.names)

    def send(n: int) -> list[str]:
        p = Producer(client_config(endpoint), (TOPIC,))
        p.startup()
        try:
            return [p.send(new_message(TOPIC, f"m{i}".encode())).message_id for i in range(n)]
        finally:
            p.shutdown()

    sent = await asyncio.to_thread(send, 40)
    got = await asyncio.to_thread(consume_all, endpoint, set(sent))
    assert set(sent) <= set(got)
    assert set(got.values()) == set(c.names), "sends spread over both groups"
    # every ack reached its group: nothing comes back once invisibility would expire
    again = await asyncio.to_thread(consume_all, endpoint, {"none"}, 3)
    assert not set(again) & set(sent)


class Commit(TransactionChecker):  # type: ignore[misc]
    def check(self, message: Message) -> TransactionResolution:
        return TransactionResolution.COMMIT


async def test_transactions_end_in_their_group(cluster: tuple[GroupsCluster, str, str]) -> None:
    _, endpoint, _ = cluster

    def run() -> tuple[list[str], list[str]]:
        p = Producer(client_config(endpoint), (TOPIC,), Commit())
        p.startup()
        committed, rolled = [], []
        try:
            for i in range(6):
                t = p.begin_transaction()
                receipt = p.send(new_message(TOPIC, f"tx{i}".encode()), t)
                if i % 2:
                    t.rollback()
                    rolled.append(receipt.message_id)
                else:
                    t.commit()
                    committed.append(receipt.message_id)
        finally:
            p.shutdown()
        return committed, rolled

    committed, rolled = await asyncio.to_thread(run)
    got = await asyncio.to_thread(consume_all, endpoint, set(committed))
    assert set(committed) <= set(got)
    assert not set(rolled) & set(got)


async def test_a_hung_master_takes_no_sends(cluster: tuple[GroupsCluster, str, str]) -> None:
    c, endpoint, url = cluster
    history = History()
    worker = threading.Thread(target=produce, args=(endpoint, history), daemon=True)
    worker.start()
    hung = "broker-a"
    m = await c.wait_master(hung)
    try:
        await wait_acks(history, 20)
        c.signal(hung, m, signal.SIGSTOP)
        before = len(history.acked)
        await wait_acks(history, before + 50, timeout=20)
        groups = (await asyncio.to_thread(health, url))["groups"]
        assert groups[hung]["masterAddr"] != c.brokers[hung][m].addr \
            or groups[hung]["status"] == "DOWN", groups
        await c.wait_master(hung, not_index=m)
        await wait_acks(history, len(history.acked) + 20, timeout=20)
    finally:
        c.signal(hung, m, signal.SIGCONT)
        history.stop.set()
        await asyncio.to_thread(worker.join, 30)
    print(f"longest gap between acks with one of two masters hung: "
          f"{history.longest_gap():.2f} s")
    assert history.longest_gap() < 2.0
    got = await asyncio.to_thread(consume_all, endpoint, set(history.acked.values()), 90)
    assert set(history.acked.values()) <= set(got), "no acknowledged message lost"
