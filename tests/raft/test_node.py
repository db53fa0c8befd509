"""The asyncio runner: three members in one event loop over real loopback TCP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from mqcluster.raft.codec import RAFT_MESSAGE_CODES
from mqcluster.raft.disk_log import PendingSync
from mqcluster.raft.node import (
    ProposalError,
    RaftNotLeaderError,
    RaftRunner,
    RaftStatus,
    RunnerOptions,
    parse_peers,
)
from mqcluster.raft.types import (
    AppendRequest,
    Entry,
    RaftConfig,
    Role,
    VoteRequest,
    VoteResponse,
)
from mqcluster.wire.frame import RemotingCommand, ResponseCode
from mqcluster.wire.rpc import Connection, HandlerRegistry, RpcClient, RpcServer
from mqcluster_testing.procs import free_addr
from tests.raft.helpers import elect, new_node

pytestmark = pytest.mark.timeout(60)


class ListMachine:
    """Keeps every value; wakes waiters on each apply."""

    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.changed = asyncio.Event()

    def apply(self, entry: Entry) -> Any:
        self.values.append(entry.data)
        self.changed.set()
        return len(self.values)

    def snapshot(self) -> bytes:
        return json.dumps([v.decode() for v in self.values]).encode()

    def restore(self, data: bytes) -> None:
        self.values = [v.encode() for v in json.loads(data)]
        self.changed.set()

    async def wait_for(self, pred: Callable[[list[bytes]], bool]) -> None:
        while not pred(self.values):
            self.changed.clear()
            await self.changed.wait()


class Group:
    def __init__(self, root: Path, options: RunnerOptions,
                 config: RaftConfig | None = None) -> None:
        self.root = root
        self.options = options
        self.config = config or RaftConfig()
        host = f"127.0.0.{random.randint(2, 250)}"
        self.peers = {f"n{i}": free_addr(host) for i in range(3)}
        self.runners: dict[str, RaftRunner] = {}
        self.machines: dict[str, ListMachine] = {}
        self.role_changed = asyncio.Event()

    async def start(self, node_id: str) -> RaftRunner:
        sm = ListMachine()
        runner = RaftRunner(
            node_id,
            self.peers,
            self.root / node_id,
            sm,
            self.config,
            options=self.options,
            rng=random.Random(node_id),
        )
        runner.on_role_change.append(lambda _s: self.role_changed.set())
        await runner.start()
        self.runners[node_id], self.machines[node_id] = runner, sm
        return runner

    async def start_all(self) -> None:
        for nid in self.peers:
            await self.start(nid)

    async def stop_all(self) -> None:
        for nid in list(self.runners):
            await self.stop(nid)

    async def stop(self, node_id: str) -> None:
        await self.runners.pop(node_id).stop()
        self.machines.pop(node_id)

    async def leader(self, exclude: str | None = None) -> RaftRunner:
        while True:
            for nid, r in self.runners.items():
                s = r.status()
                if nid != exclude and s.role == Role.LEADER:
                    return r
            self.role_changed.clear()
            await self.role_changed.wait()


@pytest.fixture
async def group(tmp_path: Path) -> AsyncIterator[Group]:
    g = Group(tmp_path, RunnerOptions(snapshot_every=0))
    for nid in g.peers:
        await g.start(nid)
    try:
        yield g
    finally:
        for nid in list(g.runners):
            await g.stop(nid)


async def test_elects_replicates_and_redirects(group: Group) -> None:
    leader = await group.leader()
    results = await asyncio.gather(*(leader.propose(f"v{i}".encode()) for i in range(50)))
    assert sorted(results) == list(range(1, 51))
    want = group.machines[leader.node_id].values
    assert sorted(want) == sorted(f"v{i}".encode() for i in range(50))
    for sm in group.machines.values():
        await asyncio.wait_for(sm.wait_for(lambda v: len(v) == 50), 5)
        assert sm.values == want
    follower = next(r for r in group.runners.values() if r is not leader)
    with pytest.raises(RaftNotLeaderError) as err:
        await follower.propose(b"x")
    assert err.value.leader_id == leader.node_id
    assert err.value.leader_addr == group.peers[leader.node_id]
    status = follower.status()
    assert isinstance(status, RaftStatus)
    assert status.role == Role.FOLLOWER and status.leader_id == leader.node_id
    assert status.to_json()["leaderAddr"] == group.peers[leader.node_id]


async def test_batch_proposal_results_in_order(group: Group) -> None:
    leader = await group.leader()
    first = await leader.propose(b"a")
    results = await leader.propose_batch([b"b", b"c", b"d"])
    assert results == [first + 1, first + 2, first + 3]


async def test_failover_and_catch_up(group: Group) -> None:
    old = await group.leader()
    await old.propose_batch([b"a", b"b", b"c"])
    await group.stop(old.node_id)
    new = await group.leader(exclude=old.node_id)
    await new.propose_batch([b"d", b"e"])
    restarted = await group.start(old.node_id)
    await asyncio.wait_for(
        group.machines[old.node_id].wait_for(lambda v: v[-2:] == [b"d", b"e"]), 10
    )
    assert group.machines[old.node_id].values == group.machines[new.node_id].values
    assert restarted.status().leader_id == new.node_id


async def test_snapshot_restart_and_install(tmp_path: Path) -> None:
    g = Group(tmp_path, RunnerOptions(snapshot_every=20, segment_bytes=2048))
    for nid in g.peers:
        await g.start(nid)
    try:
        leader = await g.leader()
        lagging = next(n for n in g.peers if n != leader.node_id)
        await g.stop(lagging)
        for i in range(6):
            await leader.propose_batch([f"{i}-{j}".encode() for j in range(10)])
        assert leader.status().snapshot_index >= 40
        assert (tmp_path / leader.node_id / "snapshot").exists()
        # The lagging member is behind the leader's snapshot: it gets the snapshot.
        await g.start(lagging)
        await asyncio.wait_for(g.machines[lagging].wait_for(lambda v: len(v) == 60), 10)
        assert g.machines[lagging].values == g.machines[leader.node_id].values
        # A restart recovers from its own snapshot plus the log after it.
        await g.stop(lagging)
        runner = await g.start(lagging)
        assert runner.status().applied_index >= 40
        await asyncio.wait_for(g.machines[lagging].wait_for(lambda v: len(v) == 60), 10)
        assert g.machines[lagging].values == g.machines[leader.node_id].values
    finally:
        for nid in list(g.runners):
            await g.stop(nid)


async def test_shared_registry(tmp_path: Path) -> None:
    """Embedded use: the runner registers its codes on a registry the host serves."""
    addr = free_addr()
    registry = HandlerRegistry()
    host, port = addr.split(":")
    server = RpcServer(host, int(port), registry)
    await server.start()
    runner = RaftRunner("solo", {"solo": addr}, tmp_path, ListMachine(), registry=registry)
    leading = asyncio.Event()
    runner.on_role_change.append(lambda s: leading.set() if s.role == Role.LEADER else None)
    await runner.start()
    try:
        await asyncio.wait_for(leading.wait(), 5)
        assert await runner.propose(b"x") == 1
    finally:
        await runner.stop()
        await server.stop()


async def test_persists_inline_on_a_fast_disk_and_in_the_io_thread_on_a_slow_one(
    tmp_path: Path,
) -> None:
    for below, inline in ((1.0, True), (0.0, False)):
        options = RunnerOptions(snapshot_every=0, inline_persist_below=below)
        g = Group(tmp_path / str(below), options)
        for nid in g.peers:
            await g.start(nid)
        try:
            leader = await g.leader()
            for i in range(5):
                await leader.propose_batch([f"{i}-{j}".encode() for j in range(20)])
            for sm in g.machines.values():
                await asyncio.wait_for(sm.wait_for(lambda v: len(v) == 100), 5)
            for runner in g.runners.values():
                assert runner.stats.persists > 0
                assert (runner.stats.inline_persists > 0) is inline
            assert len({tuple(sm.values) for sm in g.machines.values()}) == 1
        finally:
            for nid in list(g.runners):
                await g.stop(nid)


async def test_followers_write_the_records_they_received(group: Group) -> None:
    leader = await group.leader()
    await leader.propose_batch([bytes([i]) * 300 for i in range(40)])
    for sm in group.machines.values():
        await asyncio.wait_for(sm.wait_for(lambda v: len(v) == 40), 5)
    segments = {
        nid: b"".join(p.read_bytes() for p in sorted((group.root / nid / "log").glob("*.seg")))
        for nid in group.peers
    }
    assert len(set(segments.values())) == 1  # byte-identical logs on every member


async def test_raft_messages_are_served_in_the_reader(tmp_path: Path) -> None:
    registry = HandlerRegistry()
    runner = RaftRunner("solo", {"solo": free_addr()}, tmp_path, ListMachine(), registry=registry)
    await runner.start()
    try:
        assert all(registry.sync_handler(code) is not None for code in RAFT_MESSAGE_CODES)
    finally:
        await runner.stop()


async def test_sync_handlers_answer_requests_and_report_errors() -> None:
    registry = HandlerRegistry()

    def echo(cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        if cmd.body == b"boom":
            raise RuntimeError("boom")
        if cmd.body == b"bad":
            raise ValueError("bad")
        return cmd.response(body=cmd.body[::-1])

    registry.register_sync(4242, echo)
    addr = free_addr()
    host, port = addr.split(":")
    server = RpcServer(host, int(port), registry)
    await server.start()
    client = RpcClient()
    try:
        ok = await client.invoke(addr, RemotingCommand.request(4242, body=b"abc"))
        assert (ok.code, ok.body) == (ResponseCode.SUCCESS, b"cba")
        bad = await client.invoke(addr, RemotingCommand.request(4242, body=b"bad"))
        assert bad.code == ResponseCode.INVALID_REQUEST
        boom = await client.invoke(addr, RemotingCommand.request(4242, body=b"boom"))
        assert boom.code == ResponseCode.SYSTEM_ERROR and "boom" in (boom.remark or "")
    finally:
        await client.close()
        await server.stop()


def test_leader_pushes_can_leave_before_the_ready_is_persisted() -> None:
    nodes = {n: new_node(n) for n in ("a", "b", "c")}
    elect(nodes, "a")
    leader = nodes["a"]
    rd = leader.ready()  # being persisted
    leader.propose_batch([b"x", b"y"])
    leader.step(VoteRequest("c", "a", leader.term, 0, 0), 0.0)  # answered only after it
    pushes = leader.take_leader_pushes()
    assert {m.dst for m in pushes} == {"b", "c"}
    assert all(isinstance(m, AppendRequest) for m in pushes)
    leader.advance(rd)
    assert all(isinstance(m, VoteResponse) for m in leader.ready().messages)
    # Not a leader: nothing is taken early.
    follower = nodes["b"]
    follower.step(VoteRequest("c", "b", follower.term + 1, 99, follower.term + 1), 0.0)
    assert follower.take_leader_pushes() == []


def test_parse_peers() -> None:
    assert parse_peers("n0-127.0.0.2:9000;n1-127.0.0.3:9001; n2-localhost:9002") == {
        "n0": "127.0.0.2:9000",
        "n1": "127.0.0.3:9001",
        "n2": "localhost:9002",
    }
    for bad in ("", "n0", "n0-host", "n0-a:1;n0-b:2", "-a:1"):
        with pytest.raises(ValueError):
            parse_peers(bad)


async def test_disk_failure_stops_the_member(group: Group) -> None:
    leader = await group.leader()
    assert leader._log is not None

    def full_disk(entries: object, records: object = None, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    leader._log.append = full_disk  # type: ignore[method-assign]
    with pytest.raises(ProposalError, match="No space left"):
        await leader.propose(b"x")
    await asyncio.wait_for(leader.wait_stopped(), 5)
    assert isinstance(leader.failure, OSError)
    # The other two elect a new leader and carry on.
    other = await group.leader(exclude=leader.node_id)
    assert await other.propose(b"y") >= 1


async def test_failed_fsync_behind_the_leaders_writes_stops_it(group: Group) -> None:
    leader = await group.leader()
    assert leader._log is not None and leader.options.leader_sync_behind

    def failing_sync(pending: PendingSync) -> None:
        os.close(pending.fd)
        raise OSError(5, "Input/output error")

    leader._log.sync_descriptor = failing_sync  # type: ignore[method-assign]
    # The followers' acks may commit the entry before the fsync fails, or not.
    with contextlib.suppress(ProposalError):
        await leader.propose(b"x")
    await asyncio.wait_for(leader.wait_stopped(), 5)
    assert isinstance(leader.failure, OSError)
    other = await group.leader(exclude=leader.node_id)
    assert await other.propose(b"y") >= 1


@pytest.mark.parametrize("limit", [0.05, 0.0])
def test_the_cores_clock_leaves_out_time_the_loop_could_not_run(
    tmp_path: Path, limit: float
) -> None:
    """After a gap in its ticks (the process descheduled or its loop blocked) a member
    counts at most ``max_clock_gap`` of it: it could not hear its leader meanwhile."""
    real = [100.0]
    runner = RaftRunner("n0", {"n0": free_addr("127.0.0.1")}, tmp_path, ListMachine(),
                        options=RunnerOptions(max_clock_gap=limit), clock=lambda: real[0])
    seen = []
    for t in (100.01, 100.02, 101.02, 101.03):
        real[0] = t
        seen.append(runner.core_time())
    if limit:
        assert seen == pytest.approx([100.01, 100.02, 100.07, 100.08])
    else:
        assert seen == [100.01, 100.02, 101.02, 101.03]


async def test_next_index_and_waiting_until_the_log_is_applied(group: Group) -> None:
    leader = await group.leader()
    await leader.propose(b"a")
    assert leader.applied_everything
    expected = leader.next_index()
    proposals = [asyncio.ensure_future(leader.propose_batch([b"b", b"c"]))]
    await asyncio.sleep(0)  # queued, or in the log, not yet committed
    assert leader.next_index() == expected + 2
    assert not leader.applied_everything
    await leader.wait_applied(expected + 1)
    assert leader.applied_everything
    await asyncio.gather(*proposals)
    assert leader.node.entries(expected, expected + 1)[1].data == b"c"


async def test_a_log_without_snapshots_keeps_only_its_newest_entries_in_memory(
        tmp_path: Path) -> None:
    g = Group(tmp_path, RunnerOptions(snapshot_every=0, max_cached_log_bytes=4096))
    await g.start_all()
    try:
        leader = await g.leader()
        behind = next(nid for nid in g.runners if nid != leader.node_id)
        await g.stop(behind)
        values = [bytes([i % 256]) * 200 for i in range(300)]
        for i in range(0, 300, 30):
            await leader.propose_batch(values[i:i + 30])
        assert leader.node.cached_log_bytes <= 4096 + 200
        # the member that missed them all is sent them from the leader's log files
        await g.start(behind)
        await asyncio.wait_for(g.machines[behind].wait_for(lambda v: len(v) == 300), 10)
        assert g.machines[behind].values == values
    finally:
        await g.stop_all()


async def test_a_restarted_member_reads_its_log_a_part_at_a_time(tmp_path: Path) -> None:
    g = Group(tmp_path, RunnerOptions(snapshot_every=0, max_cached_log_bytes=4096),
              RaftConfig(max_committed_bytes=2000))
    await g.start_all()
    values = [bytes([i % 256]) * 200 for i in range(300)]
    try:
        leader = await g.leader()
        for i in range(0, 300, 30):
            await leader.propose_batch(values[i:i + 30])
        await g.stop_all()
        await g.start_all()
        for nid, runner in g.runners.items():
            # every value applied again from the log files (no snapshots), yet never
            # more than the limit (and the newest entries) in memory
            await asyncio.wait_for(g.machines[nid].wait_for(lambda v: len(v) >= 300), 10)
            assert g.machines[nid].values[:300] == values
            assert runner.node.cached_log_bytes <= 4096 + 200
    finally:
        await g.stop_all()


@contextlib.asynccontextmanager
async def deaf_group(tmp_path: Path) -> AsyncIterator[tuple[Group, RaftRunner]]:
    """A group whose followers would take 100 s of silence for a dead leader, and its
    leader, which has committed entry 1 (b"x")."""
    g = Group(tmp_path, RunnerOptions(snapshot_every=0), RaftConfig(max_heartbeat_leak=1000))
    await g.start_all()
    try:
        leader = await g.leader()
        assert await leader.propose(b"x") == 1
        yield g, leader
    finally:
        await g.stop_all()


async def test_followers_of_a_leader_whose_port_closed_elect_another_at_once(
        tmp_path: Path) -> None:
    # Only the leader's closed connection, and its port refusing a new one, can start
    # an election in time here.
    async with deaf_group(tmp_path) as (g, leader):
        await g.stop(leader.node_id)
        new = await asyncio.wait_for(g.leader(exclude=leader.node_id), 20)
        assert await new.propose(b"y") >= 2
        assert b"x" in g.machines[new.node_id].values


async def test_a_closed_connection_from_a_leader_still_listening_changes_nothing(
        tmp_path: Path) -> None:
    async with deaf_group(tmp_path) as (g, leader):
        term = leader.status().term
        watchers = [w for r in g.runners.values() for w in r._watchers
                    if w.get_name() == f"raft-watch-{leader.node_id}"]
        assert len(watchers) == 2  # each follower watches the leader's connection
        for sender in leader._senders.values():
            assert sender.conn is not None
            sender.conn.writer.transport.close()  # the followers' side sees it closed
        await asyncio.wait_for(asyncio.gather(*watchers), 10)  # each probed the port
        assert all(r.status().role in (Role.LEADER, Role.FOLLOWER) for r in g.runners.values())
        for _ in range(20):
            await leader.propose(b"more")
        assert leader.status().role == Role.LEADER and leader.status().term == term
        for runner in g.runners.values():
            assert runner.status().leader_id == leader.node_id
