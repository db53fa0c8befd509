"""Three real ``mqraft`` processes on 127.0.0.x: leader kill, catch-up, hostile input."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqcluster_testing.procs import Procs, procs  # noqa: F401  (fixture)
from mqcluster_testing.raft.client import ProposeOutcomeUnknownError, RaftClient
from mqcluster_testing.raft.localgroup import LocalGroup

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


class Cluster:
    def __init__(self, group: LocalGroup, client: RaftClient, children: Procs) -> None:
        self.group, self.client, self.procs = group, client, children

    def output(self, node_id: str) -> str:
        return self.procs.output_of(node_id)

    async def wait_output(self, node_id: str, needle: str, timeout: float = 10) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.output(node_id)
            if needle in text:
                return text
            await asyncio.sleep(0.05)
        raise AssertionError(f"{node_id} never logged {needle!r}:\n{self.output(node_id)}")

    async def wait_caught_up(self, node_id: str, count: int, timeout: float = 15) -> dict[str, int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            doc = await self.client.status(node_id)
            if doc is not None and doc["count"] >= count:
                return doc
            await asyncio.sleep(0.05)
        raise AssertionError(f"{node_id} did not reach {count} values:\n{self.output(node_id)}")


@pytest.fixture
async def cluster(tmp_path: Path, procs: Procs) -> AsyncIterator[Cluster]:  # noqa: F811
    group = LocalGroup(tmp_path, spawn=lambda argv, name, _log: procs.spawn(argv, name=name))
    client = RaftClient(group.peers)
    group.start_all()
    try:
        yield Cluster(group, client, procs)
    finally:
        await client.close()
        group.close()  # procs kills anything left as well


async def test_leader_kill_new_leader_and_catch_up(cluster: Cluster) -> None:
    client, group = cluster.client, cluster.group
    old = await client.wait_leader(timeout=20)
    acked: dict[int, bytes] = {}
    for i in range(10):
        batch = [f"a{i}-{j}".encode() for j in range(5)]
        first, last = await client.propose(batch)
        acked.update(zip(range(first, last + 1), batch, strict=True))

    group.kill(old)
    killed_at = time.monotonic()
    new = await client.wait_leader(timeout=10, exclude=[old], poll=0.01)
    election = time.monotonic() - killed_at
    for i in range(5):
        batch = [f"b{i}-{j}".encode() for j in range(5)]
        first, last = await client.propose(batch)
        acked.update(zip(range(first, last + 1), batch, strict=True))
    assert election < 5, f"election took {election:.2f} s"

    group.start(old)
    total = len(acked)
    docs = [await cluster.wait_caught_up(n, total) for n in group.peers]
    assert len({(d["count"], d["digest"]) for d in docs}) == 1, docs
    for node_id in group.peers:
        values = (await client.read(node_id, 1, 1000))["values"]
        # Every acknowledged value is at the position it was acknowledged at.
        assert {pos: values[pos - 1] for pos in acked} == acked, node_id
    status = await client.status(old)
    assert status is not None and status["leader"] in group.peers
    assert "role LEADER" in cluster.output(new)  # role changes are logged


def _raw_send(addr: str, data: bytes) -> bytes:
    """Send bytes on a fresh connection; return what comes back before the peer closes."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(data)
        chunks: list[bytes] = []
        while True:
            chunk = s.recv(65536)
            if not chunk:  # the node closed the connection
                return b"".join(chunks)
            chunks.append(chunk)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (struct.pack(">II", 20, 16) + b"{not json at all}", "header is not valid JSON"),
        (struct.pack(">I", 0x7FFF_FFFF) + b"\x00" * 64, "exceeds limit"),
    ],
    ids=["malformed", "oversized"],
)
async def test_bad_frame_closes_that_connection_only(
    cluster: Cluster, payload: bytes, reason: str
) -> None:
    client, group = cluster.client, cluster.group
    leader = await client.wait_leader(timeout=20)
    await client.propose([b"before"])
    # The hostile connection stays open to the leader while the group is used.
    victim = leader
    answer = await asyncio.to_thread(_raw_send, group.peers[victim], payload)
    assert answer == b""
    text = await cluster.wait_output(victim, reason)
    assert "closing connection from" in text
    # The node still serves clients and its peers: the group commits through it.
    first, _ = await client.propose([b"after"])
    assert first == 2
    for node_id in group.peers:  # the victim included
        await cluster.wait_caught_up(node_id, 2)


async def test_no_acknowledged_entry_lost_under_load_and_kills(
    tmp_path: Path, procs: Procs  # noqa: F811
) -> None:
    """Writers keep proposing while the leader is SIGKILLed twice (snapshots on)."""
    group = LocalGroup(
        tmp_path,
        extra_args=["--keep", "1000000", "--snapshot-every", "500"],
        spawn=lambda argv, name, _log: procs.spawn(argv, name=name),
    )
    group.start_all()
    client = RaftClient(group.peers, timeout=5)
    cluster = Cluster(group, client, procs)
    acked: dict[int, bytes] = {}
    stop = asyncio.Event()

    async def writer(w: int) -> None:
        own = RaftClient(group.peers, timeout=5)
        seq = 0
        try:
            while not stop.is_set():
                seq += 1
                values = [f"w{w}-{seq}-{j}".encode() for j in range(20)]
                try:
                    first, last = await own.propose(values, deadline=10)
                except ProposeOutcomeUnknownError:
                    continue  # may or may not be committed: not counted as acknowledged
                acked.update(zip(range(first, last + 1), values, strict=True))
        finally:
            await own.close()

    try:
        await client.wait_leader(timeout=20)
        writers = [asyncio.create_task(writer(w)) for w in range(3)]
        for _ in range(2):
            await asyncio.sleep(1.0)
            leader = await client.wait_leader(timeout=10)
            group.kill(leader)
            await client.wait_leader(timeout=10, exclude=[leader])
            group.start(leader)
        await asyncio.sleep(1.0)
        stop.set()
        await asyncio.gather(*writers)
        assert len(acked) > 200
        top = max(acked)
        for n in group.peers:
            await cluster.wait_caught_up(n, top)
        deadline = time.monotonic() + 15
        while True:  # unacknowledged batches may still land; wait until all agree
            docs = [await client.status(n) for n in group.peers]
            if len({(d["count"], d["digest"]) if d else None for d in docs}) == 1:
                break
            assert time.monotonic() < deadline, f"replicas disagree: {docs}"
            await asyncio.sleep(0.05)
        for node_id in group.peers:
            values = (await client.read(node_id, 1, top))["values"]
            assert len(values) == top
            lost = [pos for pos, v in acked.items() if values[pos - 1] != v]
            assert lost == [], f"{node_id}: acknowledged entries lost or moved: {lost[:5]}"
            assert len(set(values)) == len(values)  # no value applied twice
    finally:
        await client.close()
        group.close()
