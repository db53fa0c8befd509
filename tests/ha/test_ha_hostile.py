"""Hostile HA connections to a controller-mode master (in-process group, real sockets).

A stranger that sent a slave's handshake used to be served that slave's place: the
real slave's connection was closed, the stranger got the commitlog, and its acks
counted as that replica's copy (allAckInSyncStateSet writes answered as replicated on
a replica that had nothing). An ack past what was sent counted too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqcluster.protocol.ha import MasterFrameDecoder, MasterHandshake, SlaveAck, SlaveHandshake
from mqcluster.store.message import PutStatus
from mqcluster_testing.ha.group import GroupHarness


@pytest.fixture
async def group(tmp_path: Path) -> AsyncIterator[GroupHarness]:
    g = GroupHarness(tmp_path, 2)
    try:
        await g.start()
        yield g
    finally:
        await g.stop()


async def _ready(g: GroupHarness) -> tuple[int, int, int]:
    """(master index, slave index, slave broker id) once both are in the SyncStateSet."""
    m = await g.wait_master()
    s = 1 - m
    master = g.broker(m).replicas
    assert master is not None
    await g.wait_for(lambda: master.master.view is not None
                     and len(master.master.view.members) == 2)
    slave = g.broker(s).replicas
    assert slave is not None and slave.broker_id is not None
    return m, s, slave.broker_id


async def _handshake(g: GroupHarness, m: int, broker_id: int, source: str,
                     ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, MasterHandshake | None]:
    cfg = g.configs[m]
    reader, writer = await asyncio.open_connection(cfg.brokerIP1, cfg.haListenPort,
                                                   local_addr=(source, 0))
    writer.write(SlaveHandshake(broker_id).encode())
    await writer.drain()
    decoder = MasterFrameDecoder(1 << 20)
    async with asyncio.timeout(5):
        while True:
            data = await reader.read(4096)
            if not data:
                return reader, writer, None
            for frame in decoder.feed(data):
                if isinstance(frame, MasterHandshake):
                    return reader, writer, frame


async def _closed(reader: asyncio.StreamReader) -> bool:
    async with asyncio.timeout(5):
        while True:
            try:
                if not await reader.read(65536):
                    return True
            except ConnectionError:
                return True


async def test_a_stranger_cannot_take_a_slaves_place(group: GroupHarness) -> None:
    g = group
    m, s, slave_id = await _ready(g)
    ha = g.broker(m).replicas.master  # type: ignore[union-attr]
    real = ha._conns[slave_id]
    for source, claimed in (("127.0.0.99", slave_id), (g.configs[s].brokerIP1, 77)):
        _reader, writer, hs = await _handshake(g, m, claimed, source)
        try:
            assert hs is None, f"{source} claiming {claimed} was served"
        finally:
            writer.close()
    assert ha._conns[slave_id] is real and real.transferring
    # The real slave still carries the writes that need it.
    result = await g.put(m, b"after the strangers")
    assert result.status is PutStatus.PUT_OK


async def test_an_ack_past_what_was_sent_closes_the_connection(group: GroupHarness) -> None:
    g = group
    m, s, slave_id = await _ready(g)
    await g.put(m, b"x" * 100)
    ha = g.broker(m).replicas.master  # type: ignore[union-attr]
    max_offset = g.broker(m).context.store.commitlog_max_offset
    # From the slave's own host and id (what the master cannot tell from the slave).
    reader, writer, hs = await _handshake(g, m, slave_id, g.configs[s].brokerIP1)
    try:
        assert hs is not None
        writer.write(SlaveAck(0).encode())  # an empty replica: sent from the master's start
        writer.write(SlaveAck(max_offset + 10**9).encode())
        await writer.drain()
        assert await _closed(reader)
    finally:
        with contextlib.suppress(OSError):
            writer.close()
    view = ha.view
    assert view is not None
    assert view.offset_of(slave_id) <= max_offset


async def _idle(g: GroupHarness, m: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    cfg = g.configs[m]
    return await asyncio.open_connection(cfg.brokerIP1, cfg.haListenPort,
                                         local_addr=("127.0.0.99", 0))


async def test_strangers_past_the_pending_cap_are_closed_on_arrival(
        group: GroupHarness) -> None:
    g = group
    m, _s, slave_id = await _ready(g)
    ha = g.broker(m).replicas.master  # type: ignore[union-attr]
    ha.options.max_pending_connections = 4
    conns = [await _idle(g, m) for _ in range(7)]
    try:
        # The last three are closed at once; the first four wait for the deadline (10 s).
        assert all(await asyncio.gather(*(_closed(r) for r, _w in conns[4:])))
        pending = [c for c in ha._serving if c.transport is not None
                   and not c.transport.is_closing() and not c.transferring]
        assert len(pending) == 4
        assert ha._conns[slave_id].transferring
        result = await g.put(m, b"while strangers wait")
        assert result.status is PutStatus.PUT_OK
    finally:
        for _r, w in conns:
            w.close()


async def test_a_connection_without_a_handshake_is_closed_at_the_deadline(
        group: GroupHarness) -> None:
    g = group
    m, _s, slave_id = await _ready(g)
    ha = g.broker(m).replicas.master  # type: ignore[union-attr]
    real = ha._conns[slave_id]
    ha.options.handshake_timeout_s = 0.5
    conns = [await _idle(g, m) for _ in range(3)]
    try:
        assert all(await asyncio.gather(*(_closed(r) for r, _w in conns)))
        assert ha._conns[slave_id] is real and real.transferring
        result = await g.put(m, b"after the idle strangers")
        assert result.status is PutStatus.PUT_OK
    finally:
        for _r, w in conns:
            w.close()
