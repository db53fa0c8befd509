"""Master side of the HA stream: one connection per slave, and the write acks.

A slave connects, sends its handshake; the master answers with its max offset,
epoch and epoch entries; the slave truncates and acks its max offset, and the
master streams the commitlog from there. Each batch stays inside one epoch (its
header names that epoch and its start), so the slave can keep its own epoch file.
Acks move the slave's progress in the ``SyncStateView``; the confirm offset, the
producers waiting for acks and the SyncStateSet reports follow from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

from mqcluster.common.pulse import Pulse
from mqcluster.ha.ack_waiters import AckWaiters
from mqcluster.ha.replica_hosts import ReplicaHosts
from mqcluster.ha.sync_state import SyncStateView
from mqcluster.protocol.epochs import OPEN_END
from mqcluster.protocol.ha import (
    HAProtocolError,
    MasterHandshake,
    SlaveAck,
    SlaveFrameDecoder,
    SlaveHandshake,
    Transfer,
)
from mqcluster.raft.peers import normal_ip
from mqcluster.store.api import MessageStore
from mqcluster.store.epoch_file import EpochFileCache
from mqcluster.store.message import PutStatus
from mqcluster.wire.ratelog import RateLimitedLog

SENDFILE_MIN = 64 * 1024
"""Frame bodies from this size go by ``sendfile``; a smaller one costs less as one
``pread`` and one send than as a corked header, ``sendfile`` and two ``setsockopt``."""

log = logging.getLogger(__name__)
_refusals = RateLimitedLog(log)  # strangers can cause these at will

Clock = Callable[[], float]
Reporter = Callable[[set[int]], Awaitable[tuple[set[int], int] | None]]
"""Reports a SyncStateSet to the controller; the accepted set and epoch, or None."""


@dataclass
class HAMasterOptions:
    transfer_batch: int = 1024 * 1024
    """Bytes per data frame, at most. With ``frames_in_flight`` it bounds what is on its
    way to a slave: it must exceed what producers append in one turn of the master's
    event loop, or the window caps throughput."""
    frames_in_flight: int = 4
    """Data frames sent to a slave and not yet acknowledged, at most: a small window
    lets frames grow with the load (one append, ack and dispatch on the slave for many
    writes) while the next one is already on its way."""
    heartbeat_interval_s: float = 1.0
    max_not_caught_up_ms: int = 15000
    all_ack_in_sync_state_set: bool = False
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1
    slave_timeout_s: float = 3.0
    check_interval_s: float = 0.5
    confirm_delay_s: float = 0.02
    gate_dispatch: bool = True
    """Consumers see only what every SyncStateSet member has (controller mode). Classic
    master-slave dispatches everything at once, as RocketMQ does."""
    handshake_timeout_s: float = 10.0
    """A connection that has not finished its handshake (and sent its offset) this long
    after connecting is closed: an idle stranger holds no place on the HA port."""
    max_pending_connections: int = 32
    """Connections still in their handshake, at most; more are closed on arrival. A
    group has a handful of slaves, each with one connection."""


class HAMasterService:
    """Serves slaves while this broker is master (``activate``) and gates its writes."""

    def __init__(self, store: MessageStore, epochs: EpochFileCache, options: HAMasterOptions,
                 *, clock: Clock = time.monotonic) -> None:
        self.store = store
        self.epochs = epochs
        self.options = options
        self._clock = clock
        self.view: SyncStateView | None = None
        self.report: Reporter | None = None
        self._waiters = AckWaiters(self._acked)
        self._conns: dict[int, _SlaveConnection] = {}
        self._data = Pulse()
        self._tasks: set[asyncio.Task[None]] = set()
        self._serving: set[_SlaveConnection] = set()
        self._checker: asyncio.Task[None] | None = None
        self.slave_hosts: ReplicaHosts | None = None
        """Controller mode: slaves are taken only from their registered hosts."""
        store.add_append_listener(self._on_append)

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    # ---- role ------------------------------------------------------------------

    def activate(self, master_id: int, members: set[int], sss_epoch: int,
                 report: Reporter) -> None:
        """Become the group's master with SyncStateSet ``members``."""
        self.view = SyncStateView(master_id, set(members) | {master_id}, sss_epoch,
                                  self.store.commitlog_max_offset)
        self.report = report
        if self.slave_hosts is not None:
            self.slave_hosts.refresh_soon()
        self._update_confirm()
        if self._checker is None:
            self._checker = asyncio.get_running_loop().create_task(self._check_loop())

    async def deactivate(self) -> None:
        """Stop serving slaves; writes still waiting fail."""
        self.view = None
        self._waiters.fail_all()
        checker, self._checker = self._checker, None
        if checker is not None:
            checker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await checker
        # Every connection, also those still handshaking (not in _conns yet).
        for conn in list(self._serving):
            conn.close()
        self._wake_senders()
        serving = [conn.finished for conn in self._serving]
        if serving:
            await asyncio.wait(serving, timeout=5)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    @property
    def active(self) -> bool:
        return self.view is not None

    def sync_state_changed(self, members: set[int], epoch: int) -> None:
        """The controller's SyncStateSet (from a notification or a poll)."""
        if self.view is not None and epoch > self.view.epoch:
            self.view.accepted(members, epoch)
            self._update_confirm()

    # ---- write acks ----------------------------------------------------------------

    def refuse_write(self) -> tuple[PutStatus, str] | None:
        """The store's write gate: why a write must not be taken now (None: take it)."""
        view = self.view
        if view is None:
            return PutStatus.SERVICE_NOT_AVAILABLE, "this broker is not the master"
        if len(view.members) < self.options.min_in_sync_replicas:
            return (PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH,
                    f"SyncStateSet {sorted(view.members)} has fewer members than "
                    f"minInSyncReplicas={self.options.min_in_sync_replicas}")
        return None

    def _acked(self, end_offset: int) -> bool:
        view = self.view
        if view is None:
            return False
        if self.options.all_ack_in_sync_state_set:
            return view.acked_by_all(end_offset)
        return view.acked_count(end_offset) >= self.options.in_sync_replicas

    async def wait_acked(self, end_offset: int) -> bool:
        """True once the write ending at ``end_offset`` is acknowledged as configured."""
        if self.view is None:
            return False
        return await self._waiters.wait(end_offset, self.options.slave_timeout_s)

    # ---- progress ------------------------------------------------------------------

    def _on_append(self, max_offset: int) -> None:
        if self.view is not None:
            self.view.master_appended(max_offset)
            self._update_confirm()
        self._wake_senders()

    def _wake_senders(self) -> None:
        self._data.fire()

    def _update_confirm(self) -> None:
        """Confirm offset: the least offset among the SyncStateSet members. While a member
        is not connected it stays where it is (RocketMQ does the same): consumers only
        ever see what every member has, until the controller accepts a smaller set."""
        view = self.view
        if view is None:
            return
        if not self.options.gate_dispatch:
            self._waiters.release()
            return
        conns = self._conns
        if all(b == view.master_id or ((c := conns.get(b)) is not None and c.transferring)
               for b in view.members):
            confirm = view.confirm_offset
            if confirm != self.store.confirm_offset:
                self.store.set_confirm_offset(confirm)
                self._wake_senders()
        self._waiters.release()

    def _transferred(self, broker_id: int | None) -> None:
        if self.view is not None and broker_id is not None:
            self.view.transferred(broker_id, self.now_ms())

    @property
    def confirm_offset(self) -> int:
        offset = self.store.confirm_offset
        return self.store.commitlog_max_offset if offset is None else offset

    def _acked_by(self, broker_id: int, offset: int) -> None:
        if self.view is not None:
            self.view.acked(broker_id, offset, self.now_ms())
            self._update_confirm()
            self._maybe_report()

    # ---- SyncStateSet ---------------------------------------------------------------

    def _maybe_report(self) -> None:
        view, report = self.view, self.report
        if view is None or report is None:
            return
        wanted = view.wanted_members(self.now_ms(), self.options.max_not_caught_up_ms)
        proposed = view.propose(wanted)
        if proposed is not None:
            self._spawn(self._report(view, proposed, report))

    async def _report(self, view: SyncStateView, proposed: set[int], report: Reporter) -> None:
        try:
            result = await report(proposed)
        except Exception as exc:
            log.warning("SyncStateSet report %s failed: %s", sorted(proposed), exc)
            result = None
        if result is None:
            view.rejected()
        else:
            view.accepted(*result)
            log.info("SyncStateSet is now %s (epoch %d)", sorted(view.members), view.epoch)
        if self.view is view:
            self._update_confirm()

    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.check_interval_s)
            self._maybe_report()

    # ---- connections -------------------------------------------------------------

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def connection(self) -> asyncio.Protocol:
        """The HA listener's protocol factory (``loop.create_server``)."""
        return _SlaveConnection(self)

    def _connection_lost(self, conn: _SlaveConnection) -> None:
        if conn.broker_id is not None and self._conns.get(conn.broker_id) is conn:
            del self._conns[conn.broker_id]
            if self.view is not None:
                self.view.disconnected(conn.broker_id)
                self._update_confirm()
                self._maybe_report()

    def slave_offsets(self) -> dict[int, int]:
        view = self.view
        return {} if view is None else {b: r.ack_offset for b, r in view.replicas.items()}

    def start_offset_for(self, hs: SlaveHandshake, slave_offset: int) -> int:
        """Where an empty slave starts: the master's oldest file, or its last one."""
        store = self.store
        if slave_offset >= store.commitlog_min_offset and slave_offset > 0:
            return slave_offset
        if hs.sync_from_last_file:
            seg = store.config.mappedFileSizeCommitLog
            return max(store.commitlog_min_offset, store.commitlog_max_offset // seg * seg)
        return store.commitlog_min_offset


class _Phase(enum.Enum):
    HANDSHAKE = "handshake"
    OFFSET = "offset"
    """Waiting for the slave's max offset after its truncation."""
    TRANSFER = "transfer"


class _SlaveConnection(asyncio.Protocol):
    """One slave, as a protocol: its acks are taken in ``data_received`` on the turn of
    the event loop they arrive in (a reader task would take them one turn later, and
    each turn of a busy master holds the producers' answers up)."""

    def __init__(self, service: HAMasterService) -> None:
        self.service = service
        self.transport: asyncio.Transport | None = None
        self.peer: object = None
        self.decoder = SlaveFrameDecoder()
        self.phase = _Phase.HANDSHAKE
        self.broker_id: int | None = None
        self.handshake: SlaveHandshake | None = None
        self.transferring = False
        self.acked = -1
        """The slave's last acknowledged max offset."""
        self.sent = 0
        """The end of what was sent to the slave: it cannot acknowledge more."""
        self._ack = Pulse()
        self._writable = asyncio.Event()
        self._writable.set()
        self._in_flight: deque[int] = deque()
        """End offsets of the data frames the slave has not acknowledged yet."""
        self._sender: asyncio.Task[None] | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Done once the connection is lost and its sender has stopped."""

    # ---- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's is not an asyncio.Transport subclass).
        self.transport = cast(asyncio.Transport, transport)
        self.peer = transport.get_extra_info("peername")
        svc = self.service
        if svc.view is None:
            svc._serving.add(self)
            log.info("HA connection from %s refused: not the master", self.peer)
            transport.close()
            return
        opts = svc.options
        pending = sum(1 for c in svc._serving if c.phase is not _Phase.TRANSFER)
        svc._serving.add(self)
        if pending >= opts.max_pending_connections:
            _refusals.warning("pending", "HA connection from %s refused: %d connections "
                              "are already in their handshake", self.peer, pending)
            self.close()
            return
        self._deadline = asyncio.get_running_loop().call_later(
            opts.handshake_timeout_s, self._handshake_overdue)

    def _handshake_overdue(self) -> None:
        if self.phase is not _Phase.TRANSFER:
            _refusals.warning("overdue", "HA connection from %s closed: no handshake within "
                              "%.0f s", self.peer, self.service.options.handshake_timeout_s)
            self.close()

    def data_received(self, data: bytes) -> None:
        try:
            for frame in self.decoder.feed(data):
                if self.transport is None or self.transport.is_closing():
                    return
                self._on_frame(frame)
        except HAProtocolError as exc:
            log.warning("HA connection from %s closed: %s", self.peer, exc)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        if exc is not None:
            log.info("HA connection from %s lost: %r", self.peer, exc)
        self.transferring = False
        self._writable.set()
        self.service._connection_lost(self)
        sender = self._sender
        if sender is None or sender.done():
            self._finish()
        else:
            sender.cancel()
            sender.add_done_callback(lambda _: self._finish())

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # ---- frames ------------------------------------------------------------------------

    def close(self) -> None:
        self.transferring = False
        if self.transport is not None:
            self.transport.abort()

    def _finish(self) -> None:
        self.service._serving.discard(self)
        if not self.finished.done():
            self.finished.set_result(None)

    def _on_frame(self, frame: SlaveHandshake | SlaveAck) -> None:
        svc = self.service
        if self.phase is _Phase.TRANSFER:
            if not isinstance(frame, SlaveAck):
                raise HAProtocolError("handshake in the middle of a transfer")
            assert self.broker_id is not None
            if frame.max_offset > self.sent:
                # An ack for data never sent would count as a replica's copy: writes
                # answered as replicated that are not.
                raise HAProtocolError(f"slave {self.broker_id} acknowledged offset "
                                      f"{frame.max_offset}, past the {self.sent} sent to it")
            svc._acked_by(self.broker_id, frame.max_offset)
            self.acked = frame.max_offset
            self._ack.fire()
        elif self.phase is _Phase.HANDSHAKE:
            if not isinstance(frame, SlaveHandshake):
                raise HAProtocolError("first frame is not a handshake")
            self._handshake(frame)
        else:
            if not isinstance(frame, SlaveAck):
                raise HAProtocolError("expected the slave's offset after the handshake")
            self._start_transfer(frame.max_offset)

    def _handshake(self, hs: SlaveHandshake) -> None:
        svc = self.service
        view = svc.view
        assert self.transport is not None
        if view is None:
            self.close()
            return
        if hs.broker_id == view.master_id:
            raise HAProtocolError(f"slave claims the master's broker id {hs.broker_id}")
        gate = svc.slave_hosts
        if gate is not None:
            # Before anything else: a stranger must neither get the commitlog nor push
            # the real slave of that id out.
            peer = self.peer
            remote = normal_ip(str(peer[0])) if isinstance(peer, tuple) and peer else None
            reason = gate.refusal(hs.broker_id, remote)
            if reason is not None:
                gate.log_refusal(peer, reason)
                self.close()
                return
        self.broker_id = hs.broker_id
        self.handshake = hs
        old = svc._conns.get(hs.broker_id)
        if old is not None:
            old.close()
        svc._conns[hs.broker_id] = self
        entries = tuple((e.epoch, e.start_offset) for e in svc.epochs.entries)
        self.transport.write(MasterHandshake(svc.store.commitlog_max_offset,
                                             svc.epochs.last_epoch, entries).encode())
        self.phase = _Phase.OFFSET

    def _start_transfer(self, slave_offset: int) -> None:
        svc = self.service
        view = svc.view
        hs = self.handshake
        assert hs is not None
        if view is None:
            self.close()
            return
        if slave_offset > svc.store.commitlog_max_offset:
            raise HAProtocolError(f"slave offset {slave_offset} is beyond the master's "
                                  f"{svc.store.commitlog_max_offset}: it did not truncate")
        start = svc.start_offset_for(hs, slave_offset)
        self.acked = start
        self.sent = max(start, slave_offset)
        view.connected(hs.broker_id, hs.async_learner, svc.now_ms())
        self.phase = _Phase.TRANSFER
        if self._deadline is not None:
            self._deadline.cancel()
        self.transferring = True
        svc._acked_by(hs.broker_id, slave_offset)
        log.info("slave %d connected at offset %d, transfer from %d",
                 hs.broker_id, slave_offset, start)
        self._sender = asyncio.get_running_loop().create_task(self._send(start))

    async def _send(self, start: int) -> None:
        try:
            await self._send_from(start)
        except HAProtocolError as exc:
            log.warning("HA connection from %s closed: %s", self.peer, exc)
        except (ConnectionError, OSError) as exc:
            log.info("HA connection from %s lost: %r", self.peer, exc)
        finally:
            self.close()

    async def _send_from(self, offset: int) -> None:
        """Stream the commitlog from ``offset``. With nothing new to send, a header-only
        frame carries a changed confirm offset (after ``confirm_delay_s``, so acks and
        confirm updates do not ping-pong) or serves as the heartbeat."""
        svc = self.service
        store = svc.store
        opts = svc.options
        transport = self.transport
        assert transport is not None
        sent_confirm = -1
        loop = asyncio.get_running_loop()
        last_sent = loop.time()
        while svc.view is not None and not transport.is_closing():
            max_offset = store.commitlog_max_offset
            confirm = svc.confirm_offset
            while self._in_flight and self._in_flight[0] <= self.acked:
                self._in_flight.popleft()
            if offset < max_offset and len(self._in_flight) >= opts.frames_in_flight:
                await self._ack.wait(opts.heartbeat_interval_s)
                continue
            if offset < max_offset:
                entry = svc.epochs.find_epoch_by_offset(offset)
                if entry is None:
                    raise HAProtocolError(f"offset {offset} is in no epoch of the master")
                limit = max_offset if entry.end_offset == OPEN_END else min(
                    entry.end_offset, max_offset)
                region = store.commitlog_region(offset, min(limit - offset,
                                                            opts.transfer_batch))
                if region is None:
                    raise HAProtocolError(f"master cannot read its commitlog at {offset}")
                frame = Transfer(offset, entry.epoch, entry.start_offset, confirm)
            else:
                wait = (opts.confirm_delay_s if confirm != sent_confirm
                        else opts.heartbeat_interval_s) - (loop.time() - last_sent)
                if wait > 0:
                    await svc._data.wait(wait)
                    continue
                entry = svc.epochs.last_entry
                epoch, start = (entry.epoch, entry.start_offset) if entry else (0, 0)
                frame = Transfer(offset, epoch, min(start, offset), confirm)
                region = None
            svc._transferred(self.broker_id)
            sent_confirm = confirm
            last_sent = loop.time()
            if region is None:
                transport.write(frame.header())
            else:
                self._send_region(frame, *region)
                offset += region[2]
                self.sent = offset
                self._in_flight.append(offset)
            if not self._writable.is_set():
                await self._writable.wait()

    def _send_region(self, frame: Transfer, fd: int, pos: int, size: int) -> None:
        """A data frame whose body is ``size`` bytes of the commitlog file ``fd`` at
        ``pos``. A large body, with nothing queued in the transport, goes from the page
        cache to the socket by ``sendfile`` (no copy through Python); the rest, if the
        socket takes less, and small bodies are read and written as usual."""
        transport = self.transport
        assert transport is not None
        header = frame.header(size)
        sent = 0
        # (uvloop makes a socket object on every get_extra_info("socket"): large frames only)
        sock = transport.get_extra_info("socket") if size >= SENDFILE_MIN else None
        if sock is not None and transport.get_write_buffer_size() == 0:
            # Corked, the header waits for the body: one segment, one wakeup of the slave.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            try:
                transport.write(header)
                header = b""
                if transport.get_write_buffer_size() == 0:  # the header is out: the body may
                    with contextlib.suppress(BlockingIOError, InterruptedError):
                        sent = os.sendfile(sock.fileno(), fd, pos, size)
            finally:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
        if sent < size:
            transport.write(header + os.pread(fd, size - sent, pos + sent))
