"""Slave side of the HA stream: handshake, truncation, then copy the master's commitlog.

READY (connect) -> HANDSHAKE (send id and flags, receive the master's epochs,
truncate to the consistent point) -> TRANSFER (append what the master sends, record
each new epoch, ack the new max offset). Any protocol error or lost connection goes
back to READY and, after ``reconnect_interval_s``, starts over with a new handshake;
nothing from a frame that broke the protocol is appended.

In TRANSFER the connection's protocol appends frames on the turn of the event loop they
arrive in, straight from its receive buffer, and acks once for all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from mqcluster.protocol.ha import (
    HAProtocolError,
    HAState,
    MasterFrameDecoder,
    MasterHandshake,
    SlaveAck,
    SlaveHandshake,
    Transfer,
)
from mqcluster.protocol.sync_point import NoCommonEpochError, find_sync_point, with_ends
from mqcluster.store.api import MessageStore
from mqcluster.store.epoch_file import EpochFileCache

log = logging.getLogger(__name__)
T = TypeVar("T")

BUFFER_SIZE = 4 << 20
"""Receive buffer; it grows to hold a frame larger than this."""
MIN_READ = 256 << 10
"""Free room below which received bytes are moved to the buffer's start before a read."""
MAX_BODY = 64 << 20


@dataclass
class HASlaveOptions:
    broker_id: int
    sync_from_last_file: bool = False
    async_learner: bool = False
    reconnect_interval_s: float = 0.2
    connect_timeout_s: float = 3.0
    idle_timeout_s: float = 10.0
    """No frame (not even a heartbeat) for this long: the master is presumed gone."""
    source_host: str | None = None
    """Connect from this address: the host this replica is registered at, which a
    controller-mode master checks (``mqcluster.ha.replica_hosts``). Unbound where the
    address is not this machine's."""


class HASlaveClient:
    def __init__(self, store: MessageStore, epochs: EpochFileCache, master_ha_addr: str,
                 options: HASlaveOptions,
                 on_blocked: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.epochs = epochs
        self.master_ha_addr = master_ha_addr
        self.options = options
        self.state = HAState.READY
        self.blocked: str | None = None
        """Set when replication stopped for a person's decision (no common epoch)."""
        self._on_blocked = on_blocked
        self._task: asyncio.Task[None] | None = None
        self.handshakes = 0
        self.master_confirm = 0
        self._caught_up = asyncio.Event()

    def start(self) -> None:
        if self._task is None:
            self.state = HAState.READY
            self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-slave")

    async def stop(self) -> None:
        self.state = HAState.SHUTDOWN
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while self.state is not HAState.SHUTDOWN:
            try:
                await self._session()
            except NoCommonEpochError as exc:
                self.blocked = str(exc)
                self.state = HAState.SUSPEND
                log.error("replication from %s stopped, it needs an operator: %s",
                          self.master_ha_addr, exc)
                if self._on_blocked is not None:
                    self._on_blocked(str(exc))
                return
            except HAProtocolError as exc:
                log.warning("HA stream from %s broke the protocol (%s); handshaking again",
                            self.master_ha_addr, exc)
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                log.info("HA connection to %s: %r", self.master_ha_addr, exc)
            self.state = HAState.READY
            await asyncio.sleep(self.options.reconnect_interval_s)

    async def _connect(self, loop: asyncio.AbstractEventLoop, stream: _MasterStream,
                       host: str, port: int) -> None:
        source = self.options.source_host
        if source:
            try:
                await loop.create_connection(lambda: stream, host, port,
                                             local_addr=(source, 0))
                return
            except OSError as exc:
                if exc.errno != errno.EADDRNOTAVAIL:
                    raise
                log.warning("cannot connect to the master from this replica's address %s "
                            "(%s); connecting from any address, which the master may "
                            "refuse", source, exc)
                self.options.source_host = None
        await loop.create_connection(lambda: stream, host, port)

    async def _session(self) -> None:
        host, port = self.master_ha_addr.rsplit(":", 1)
        opts = self.options
        loop = asyncio.get_running_loop()
        stream = _MasterStream(self)
        async with asyncio.timeout(opts.connect_timeout_s):
            await self._connect(loop, stream, host, int(port))
        try:
            self.state = HAState.HANDSHAKE
            stream.write(SlaveHandshake(opts.broker_id, opts.sync_from_last_file,
                                        opts.async_learner).encode())
            hs = await stream.wait(stream.handshake)
            await self.truncate_to_master(hs)
            self.handshakes += 1
            self.state = HAState.TRANSFER
            stream.write(SlaveAck(self.store.commitlog_max_offset).encode())
            stream.transfer()
            await stream.wait(stream.closed)
        finally:
            # abort, not close: a hung master may never read what is buffered, and a
            # graceful close would wait for it (and hold up the next role change).
            stream.abort()

    async def truncate_to_master(self, hs: MasterHandshake) -> None:
        """Cut this replica back to its last point in common with the master."""
        store = self.store
        local_max = store.commitlog_max_offset
        self.epochs.truncate_prefix_by_offset(store.commitlog_min_offset)
        mine = with_ends([(e.epoch, e.start_offset) for e in self.epochs.entries], local_max)
        theirs = with_ends(list(hs.entries), hs.max_offset)
        point = find_sync_point(mine, store.commitlog_min_offset, local_max, theirs)
        if point.restart_empty:
            if local_max > store.commitlog_min_offset:
                log.warning("replica data ends below what the master keeps; starting empty")
                await store.truncate_commitlog(None)
            self.epochs.truncate_suffix_by_offset(0)
            return
        if point.truncate_to < local_max:
            if not store.is_record_start(point.truncate_to):
                # The epoch files claim the same bytes below the point, and this log has
                # no record boundary there: they do not describe the commitlogs (a cut a
                # power loss undid). Cutting would tear a record and splice the master's
                # bytes onto it; stop for a person instead.
                raise NoCommonEpochError(
                    f"sync point {point.truncate_to} is inside a record of this replica "
                    f"(terms {[(e.epoch, e.start_offset) for e in mine]}, master's "
                    f"{list(hs.entries)}): the epoch files do not match the commitlogs")
            log.warning("truncating to %d to match the master (was %d)", point.truncate_to,
                        local_max)
            await store.truncate_commitlog(point.truncate_to)
        self.epochs.truncate_suffix_by_offset(store.commitlog_max_offset)

    def append(self, frame: Transfer) -> None:
        """Append a frame's bytes (no flush wait) and take its confirm offset."""
        store = self.store
        if frame.body:
            empty = store.commitlog_max_offset == store.commitlog_min_offset == 0
            if frame.offset != store.commitlog_max_offset and not empty:
                raise HAProtocolError(f"transfer at {frame.offset} does not follow this "
                                      f"replica's end {store.commitlog_max_offset}")
            last = self.epochs.last_entry
            if last is None or frame.epoch > last.epoch:
                self.epochs.append(frame.epoch, max(frame.epoch_start_offset, frame.offset)
                                   if last is None else frame.epoch_start_offset)
            elif frame.epoch < last.epoch:
                raise HAProtocolError(f"transfer of epoch {frame.epoch} after epoch "
                                      f"{last.epoch}")
            if not store.append_replicated(frame.offset, frame.body):
                raise HAProtocolError(f"commitlog refused bytes at {frame.offset}")
        self.master_confirm = frame.confirm_offset
        store.set_confirm_offset(min(frame.confirm_offset, store.commitlog_max_offset))


class _MasterStream(asyncio.BufferedProtocol):
    """The connection to the master, received into one buffer.

    Until ``transfer()`` it only looks for the master's handshake. Then every read's
    whole frames are appended at once, from the buffer (no copy), and acknowledged with
    one ack; where the store flushes each write (SYNC_FLUSH) the ack waits for the flush.
    """

    def __init__(self, client: HASlaveClient) -> None:
        self.client = client
        self.decoder = MasterFrameDecoder(max_body=MAX_BODY)
        self.buf = bytearray(BUFFER_SIZE)
        self.start = 0
        """First byte not yet decoded."""
        self.end = 0
        """End of the bytes received."""
        self.transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.handshake: asyncio.Future[MasterHandshake] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self.transferring = False
        self.received = False
        """Something arrived since the session last looked (idle check)."""
        self._durable = client.store.replicated_writes_wait_flush
        self._ack_wanted = -1
        self._acker: asyncio.Task[None] | None = None
        self._ack_ready = asyncio.Event()

    # ---- session side ------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
        if self._acker is not None:
            self._acker.cancel()

    async def wait(self, fut: asyncio.Future[T]) -> T:
        """``fut``'s result; a lost connection or a broken frame raises, and so does
        ``idle_timeout_s`` without a byte from the master."""
        idle = self.client.options.idle_timeout_s
        while not fut.done():
            self.received = False
            waiting: list[asyncio.Future[Any]] = [fut, self.closed]
            await asyncio.wait(waiting, timeout=idle, return_when=asyncio.FIRST_COMPLETED)
            if self.closed.done():
                self.closed.result()
            if not fut.done() and not self.received:
                raise TimeoutError(f"nothing from the master for {idle} s")
        return fut.result()

    def transfer(self) -> None:
        """Start appending what the master sends (after the handshake and truncation)."""
        self.transferring = True
        if self._durable:
            self._acker = asyncio.get_running_loop().create_task(self._ack_flushed())
        self._decode()

    # ---- asyncio.BufferedProtocol -----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's is not an asyncio.Transport subclass).
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self.buf) - self.end < MIN_READ:
            pending = self.end - self.start
            # a larger body fails in parse(); never allocate for it
            need = min(self.decoder.frame_size(self.buf, self.start, self.end) or 0, MAX_BODY)
            size = max(len(self.buf), need + MIN_READ)
            if size > len(self.buf):
                grown = bytearray(size)
                grown[:pending] = self.buf[self.start:self.end]
                self.buf = grown
            else:
                self.buf[:pending] = self.buf[self.start:self.end]
            self.start, self.end = 0, pending
        return memoryview(self.buf)[self.end:]

    def buffer_updated(self, nbytes: int) -> None:
        self.end += nbytes
        self.received = True
        self._decode()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionError("master closed the connection"))

    # ---- frames ------------------------------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        if not self.closed.done():
            self.closed.set_exception(exc)
            self.closed.exception()  # retrieved by the session, or by nobody after a stop
        if self.transport is not None:
            self.transport.abort()

    def _decode(self) -> None:
        if self.closed.done():
            return
        try:
            if not self.transferring:
                if not self.handshake.done():
                    self._decode_handshake()
                return
            self._append_frames()
        except HAProtocolError as exc:
            self._fail(exc)

    def _decode_handshake(self) -> None:
        frames, used = self.decoder.parse(self.buf, self.start, self.end,
                                          stop_after_handshake=True)
        if not frames:
            return
        self.start += used
        hs = frames[0]
        if not isinstance(hs, MasterHandshake):
            raise HAProtocolError("the master's first frame is not a handshake")
        self.handshake.set_result(hs)

    def _append_frames(self) -> None:
        frames, used = self.decoder.parse(self.buf, self.start, self.end)
        if not frames:
            return
        client = self.client
        for frame in frames:
            if not isinstance(frame, Transfer):
                raise HAProtocolError("handshake in the middle of a transfer")
            client.append(frame)
        self.start += used
        if self.start == self.end:
            self.start = self.end = 0
        max_offset = client.store.commitlog_max_offset
        if self._durable:
            self._ack_wanted = max_offset
            self._ack_ready.set()
        else:
            self.write(SlaveAck(max_offset).encode())

    async def _ack_flushed(self) -> None:
        """SYNC_FLUSH: ack what is flushed, as soon as it is."""
        store = self.client.store
        try:
            while True:
                await self._ack_ready.wait()
                self._ack_ready.clear()
                target = self._ack_wanted
                if not await store.wait_replicated_durable(target):
                    raise HAProtocolError(f"commitlog did not flush the bytes below {target}")
                self.write(SlaveAck(target).encode())
        except HAProtocolError as exc:
            self._fail(exc)
