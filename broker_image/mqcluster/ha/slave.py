"""Slave side of the HA stream: handshake, truncation, then copy the master's commitlog.

READY (connect) -> HANDSHAKE (send id and flags, receive the master's epochs,
truncate to the consistent point) -> TRANSFER (append what the master sends, record
each new epoch, ack the new max offset). Any protocol error or lost connection goes
back to READY and, after ``reconnect_interval_s``, starts over with a new handshake;
nothing from a frame that broke the protocol is appended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from mqcluster.ha.protocol import (
    HAProtocolError,
    HAState,
    MasterFrame,
    MasterFrameDecoder,
    MasterHandshake,
    SlaveAck,
    SlaveHandshake,
    Transfer,
)
from mqcluster.ha.truncation import NoCommonEpochError, find_sync_point, with_ends
from mqcluster.store.api import MessageStore
from mqcluster.store.epoch_file import EpochFileCache

log = logging.getLogger(__name__)

READ_SIZE = 1 << 20


@dataclass
class HASlaveOptions:
    broker_id: int
    sync_from_last_file: bool = False
    async_learner: bool = False
    reconnect_interval_s: float = 0.2
    connect_timeout_s: float = 3.0
    idle_timeout_s: float = 10.0
    """No frame (not even a heartbeat) for this long: the master is presumed gone."""


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

    async def _session(self) -> None:
        host, port = self.master_ha_addr.rsplit(":", 1)
        async with asyncio.timeout(self.options.connect_timeout_s):
            reader, writer = await asyncio.open_connection(host, int(port))
        try:
            self.state = HAState.HANDSHAKE
            opts = self.options
            writer.write(SlaveHandshake(opts.broker_id, opts.sync_from_last_file,
                                        opts.async_learner).encode())
            await writer.drain()
            decoder = MasterFrameDecoder(max_body=64 * 1024 * 1024)
            frames: list[MasterFrame] = []

            async def next_frame() -> MasterFrame:
                while not frames:
                    async with asyncio.timeout(opts.idle_timeout_s):
                        data = await reader.read(READ_SIZE)
                    if not data:
                        raise ConnectionError("master closed the connection")
                    frames.extend(decoder.feed(data))
                return frames.pop(0)

            hs = await next_frame()
            if not isinstance(hs, MasterHandshake):
                raise HAProtocolError("the master's first frame is not a handshake")
            await self.truncate_to_master(hs)
            self.handshakes += 1
            self.state = HAState.TRANSFER
            writer.write(SlaveAck(self.store.commitlog_max_offset).encode())
            await writer.drain()
            while True:
                frame = await next_frame()
                if not isinstance(frame, Transfer):
                    raise HAProtocolError("handshake in the middle of a transfer")
                await self.apply(frame)
                writer.write(SlaveAck(self.store.commitlog_max_offset).encode())
                await writer.drain()
        finally:
            # abort, not close: a hung master may never read what is buffered, and a
            # graceful close would wait for it (and hold up the next role change).
            writer.transport.abort()

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
            log.warning("truncating to %d to match the master (was %d)", point.truncate_to,
                        local_max)
            await store.truncate_commitlog(point.truncate_to)
        self.epochs.truncate_suffix_by_offset(store.commitlog_max_offset)

    async def apply(self, frame: Transfer) -> None:
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
            if not await store.append_commitlog(frame.offset, frame.body):
                raise HAProtocolError(f"commitlog refused bytes at {frame.offset}")
        self.master_confirm = frame.confirm_offset
        store.set_confirm_offset(min(frame.confirm_offset, store.commitlog_max_offset))
