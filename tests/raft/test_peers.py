"""Which connections may speak for a member (PeerGate), and members connecting from
their own configured host (PeerClient)."""

from __future__ import annotations

import asyncio

import pytest

from mqcluster.raft.node import RunnerOptions
from mqcluster.raft.peers import (
    HOSTS_ENV,
    PeerClient,
    PeerGate,
    hosts_checked,
    normal_ip,
    remote_ip,
)
from mqcluster.wire.rpc import Connection, HandlerRegistry, RpcServer
from mqcluster_testing.procs import free_addr

PEERS = {"n0": "127.0.0.5:9000", "n1": "127.0.0.6:9000", "n2": "[::1]:9000"}


def test_only_configured_peers_from_their_hosts_are_taken() -> None:
    gate = PeerGate(PEERS)
    assert gate.refusal("n0", "127.0.0.5") is None
    assert gate.refusal("n2", "::1") is None
    assert gate.refusal("n9", "127.0.0.5") == "sender 'n9' is not a configured peer"
    assert gate.refusal("n1", "127.0.0.5") == (
        "sender 'n1' is configured at 127.0.0.6, but the connection comes from 127.0.0.5")
    assert gate.refusal("n0", None) is not None


def test_host_check_can_be_turned_off_but_not_the_peer_check() -> None:
    gate = PeerGate(PEERS, check_hosts=False)
    assert gate.refusal("n1", "10.1.2.3") is None
    assert gate.refusal("stranger", "127.0.0.5") is not None


def test_addresses_are_compared_in_canonical_form() -> None:
    assert normal_ip("::ffff:127.0.0.5") == "127.0.0.5"
    assert normal_ip("[::1]") == "::1"
    assert normal_ip("0:0:0:0:0:0:0:1") == "::1"
    assert normal_ip("controller-0.controller") is None
    assert PeerGate(PEERS).refusal("n0", normal_ip("::ffff:127.0.0.5")) is None


async def test_names_are_resolved_and_resolved_again_when_an_address_changes() -> None:
    now = [0.0]
    gate = PeerGate({"n0": "localhost:9000", "n1": "127.0.0.6:9000"}, clock=lambda: now[0])
    assert gate.refusal("n0", "127.0.0.1") is not None  # not resolved yet
    await gate.resolve()
    assert "127.0.0.1" in gate.addresses("n0")
    assert gate.refusal("n0", "127.0.0.1") is None
    # A pod restarted at another address: the next refusal starts a new lookup, at
    # most one a second.
    gate._addrs["n0"] = frozenset({"10.9.9.9"})
    now[0] += 5
    assert gate.refusal("n0", "127.0.0.1") is not None
    assert gate.refresher.task is not None
    await gate.refresher.task
    assert gate.refusal("n0", "127.0.0.1") is None
    await gate.close()


async def test_a_member_connects_from_its_own_configured_host() -> None:
    host = free_addr().rpartition(":")[0]
    seen: list[str | None] = []
    registry = HandlerRegistry()
    server = RpcServer("127.0.0.1", 0, registry)
    await server.start()
    client = PeerClient(host)
    try:
        conn = await client.connection(f"127.0.0.1:{server.port}")
        assert await client.connection(f"127.0.0.1:{server.port}") is conn
        async with asyncio.timeout(5):
            while not server.connections:
                await asyncio.sleep(0.01)
        seen = [remote_ip(c) for c in server.connections]
        assert seen == [host]
    finally:
        await client.close()
        await server.stop()


@pytest.mark.parametrize("source", ["192.0.2.77", "0.0.0.0"])
async def test_an_address_it_cannot_bind_falls_back_to_any(source: str) -> None:
    server = RpcServer("127.0.0.1", 0, HandlerRegistry())
    await server.start()
    client = PeerClient(source)
    try:
        conn = await client.connection(f"127.0.0.1:{server.port}")
        assert isinstance(conn, Connection) and not conn.closed
        assert client.source_host is None
    finally:
        await client.close()
        await server.stop()


@pytest.mark.parametrize(("value", "checked"), [
    (None, True), ("check", True), ("any", False), (" ANY ", False), ("no", True),
])
def test_host_checks_follow_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str | None, checked: bool
) -> None:
    if value is None:
        monkeypatch.delenv(HOSTS_ENV, raising=False)
    else:
        monkeypatch.setenv(HOSTS_ENV, value)
    assert hosts_checked() is checked
    assert RunnerOptions().check_peer_hosts is checked
