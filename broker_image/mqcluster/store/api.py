"""``MessageStore``: the public interface of the store (commitlog, consume queues, metadata).

Threading model: every method is called from the event loop thread that ran ``start()``
(or from one thread only, for tools using ``open()``/``close()``). Appends run on that
thread; fsyncs run in worker threads, and one commitlog fsync serves every producer
waiting for it (group commit).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Protocol

from mqcluster.common.files import atomic_write, fsync_dir, makedirs_durable
from mqcluster.protocol.properties import PROPERTY_UNIQ_KEY
from mqcluster.store import codec
from mqcluster.store.batch import BatchPutResult, RawBatch, check_batch
from mqcluster.store.built import BuiltBatch
from mqcluster.store.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from mqcluster.store.commitlog import CommitLog, RecoveryReport
from mqcluster.store.config import FlushDiskType, StoreConfig
from mqcluster.store.consume_queue import CqEntry
from mqcluster.store.consume_queue_store import ConsumeQueueStore
from mqcluster.store.consumer_offset import ConsumerOffsetManager
from mqcluster.store.damage import DamageArchive
from mqcluster.store.dispatch_service import DispatchService
from mqcluster.store.dispatcher import Dispatcher
from mqcluster.store.errors import StoreError, StoreLayoutError, StoreLockedError
from mqcluster.store.filter import MessageFilter
from mqcluster.store.flusher import GroupCommitFlusher
from mqcluster.store.layout import (
    COMMITLOG_KEY,
    CONSUME_QUEUE_KEY,
    check_recorded,
    dirs_with_files,
    load_layout,
    save_layout,
)
from mqcluster.store.lockfile import StoreLock
from mqcluster.store.message import GetResult, MessageRecord, PutResult, PutStatus, StoredMessage
from mqcluster.store.reader import get_messages
from mqcluster.store.recovery import recover
from mqcluster.store.retention import CleanResult, Retention, disk_usage_ratio
from mqcluster.store.subscription_group import SubscriptionGroupManager
from mqcluster.store.topic_config import TopicConfigManager
from mqcluster.store.validation import validate

log = logging.getLogger(__name__)

Clock = Callable[[], float]
FsyncFn = Callable[[int], None]
DiskUsageFn = Callable[[str], float]
ArrivalListener = Callable[[str, int, int], None]
AppendListener = Callable[[int], None]

__all__ = ["MessageStore", "StoreError", "StoreLayoutError", "StoreLockedError", "WriteGate"]


class ReplicatedWriter(Protocol):
    async def put_messages(self, recs: Sequence[MessageRecord]) -> list[PutResult]: ...

    async def put_batch(self, batch: RawBatch) -> BatchPutResult: ...

    async def put_batches(self, batches: Sequence[RawBatch]) -> list[BatchPutResult]: ...


class WriteGate(Protocol):
    """Replication's say over writes (controller mode's master, DLedger...)."""

    def refuse_write(self) -> tuple[PutStatus, str] | None:
        """Why no write may be taken now, or None."""

    async def wait_acked(self, end_offset: int) -> bool:
        """True once the replicas acknowledge everything below ``end_offset``."""


class MessageStore:
    """Single-node message store, in the shape of RocketMQ's ``DefaultMessageStore``.

    ``clock`` returns seconds (as ``time.time``); ``fsync`` is called with a file
    descriptor for every commitlog and consume-queue fsync (tests count them);
    ``disk_usage`` returns the used ratio (0.0-1.0) of the file system holding a path.
    """

    topics: TopicConfigManager
    subscriptions: SubscriptionGroupManager
    offsets: ConsumerOffsetManager

    def __init__(
        self,
        config: StoreConfig,
        *,
        clock: Clock = time.time,
        fsync: FsyncFn = os.fsync,
        disk_usage: DiskUsageFn | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._fsync = fsync
        self.topics = TopicConfigManager(config.config_dir, clock)
        self.subscriptions = SubscriptionGroupManager(config.config_dir, clock)
        self.offsets = ConsumerOffsetManager(config.config_dir)
        self._commitlog = CommitLog(config.commitlog_dir, config.mappedFileSizeCommitLog, fsync)
        self._queues = ConsumeQueueStore(config.consumequeue_dir,
                                         config.mappedFileSizeConsumeQueue)
        self._dispatcher = Dispatcher(self._commitlog, self._queues)
        self._retention = Retention(config, self._commitlog, self._queues, clock,
                                    disk_usage or disk_usage_ratio)
        self._dispatch = DispatchService(self._dispatcher, self._dispatch_limit)
        self._confirm_offset: int | None = None
        self._append_listeners: list[AppendListener] = []
        self.write_gate: WriteGate | None = None
        self.writer: ReplicatedWriter | None = None
        """DLedger mode: writes go through the Raft group, which appends them on commit."""
        self._lock = StoreLock(config.locked_dirs, [config.epoch_file_path], config.lock_path)
        self._opened = False
        self._running = False
        self.recovery: RecoveryReport | None = None
        self._flush_pool: ThreadPoolExecutor | None = None
        self._io_pool: ThreadPoolExecutor | None = None
        self._flusher: GroupCommitFlusher | None = None
        self._flush_observer: Callable[[float], None] | None = None
        self._maintenance: asyncio.Lock | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # lifecycle
    def open(self) -> None:
        """Load config files, recover the commitlog and consume queues (synchronous)."""
        if self._opened:
            return
        cfg = self.config
        makedirs_durable(cfg.storePathRootDir)  # (its entry too: a power loss keeps it)
        self._lock.acquire()
        try:
            # Everything is checked before anything is written (a refusal leaves the files
            # as they were): the recorded segment sizes, the checkpoint, then each
            # directory's segments as recovery loads them all, before it cuts any.
            configured = self._check_layout()
            checkpoint = load_checkpoint(cfg.checkpoint_path)
            self.topics.load()
            self.subscriptions.load()
            self.offsets.load()
            abnormal = os.path.exists(cfg.abort_path)
            if cfg.storePathDLedgerCommitLog is not None:
                # DLedger: the commitlog's tail may hold entries not committed yet; the
                # consume queues stop where the last committed one ended (the Raft log
                # moves it on as entries commit).
                self._confirm_offset = checkpoint.confirm_phy_offset if checkpoint else 0
            self.recovery = recover(self._commitlog, self._queues, self._dispatcher,
                                    checkpoint, cfg.checkCRCOnRecover,
                                    DamageArchive(cfg.damaged_dir, self._clock),
                                    self._confirm_offset)
            if load_layout(cfg.layout_path) != configured:
                save_layout(cfg.layout_path, configured)
            if abnormal:
                log.warning("store %s was not shut down cleanly; recovered: %s",
                            cfg.storePathRootDir, self.recovery)
            atomic_write(cfg.abort_path, b"")
            self._write_checkpoint(self._dispatcher.offset,
                                   self._dispatcher.last_store_timestamp,
                                   self._commitlog.last_store_timestamp)
        except BaseException:
            self._commitlog.close()
            self._queues.close()
            self._lock.release()
            raise
        self._opened = True

    def _check_layout(self) -> dict[str, int]:
        """Refuse segment sizes other than those the files were written with; returns
        the configured sizes (recorded once the store has opened)."""
        cfg = self.config
        configured = {COMMITLOG_KEY: cfg.mappedFileSizeCommitLog,
                      CONSUME_QUEUE_KEY: cfg.mappedFileSizeConsumeQueue}
        recorded = load_layout(cfg.layout_path)
        check_recorded(cfg.layout_path, recorded, configured, {
            COMMITLOG_KEY: dirs_with_files([cfg.commitlog_dir]),
            CONSUME_QUEUE_KEY: dirs_with_files(self._queues.queue_dirs())})
        self._commitlog.files.size_recorded = COMMITLOG_KEY in recorded
        self._queues.size_recorded = CONSUME_QUEUE_KEY in recorded
        return configured

    def close(self) -> None:
        """Flush everything, write the checkpoint, mark a clean shutdown (synchronous)."""
        if not self._opened:
            return
        cl = self._commitlog
        cl.fsync_range(cl.flushed_offset, cl.max_offset)
        cl.flushed_offset = cl.max_offset
        self._dispatcher.dispatch(self._dispatch_limit())
        self._write_checkpoint(self._dispatcher.offset, self._dispatcher.last_store_timestamp,
                               cl.last_store_timestamp)
        self.offsets.persist()
        cl.close()
        self._queues.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.config.abort_path)
        fsync_dir(self.config.storePathRootDir)
        self._opened = False
        self._lock.release()

    async def start(self) -> None:
        """``open()`` then run the flusher, dispatcher, checkpoint, offset and retention tasks."""
        if self._running:
            return
        self.open()
        cfg = self.config
        self._flush_pool = ThreadPoolExecutor(1, thread_name_prefix="store-flush")
        self._io_pool = ThreadPoolExecutor(1, thread_name_prefix="store-io")
        self._flusher = GroupCommitFlusher(
            self._commitlog, self._flush_pool, cfg.flushDiskType is FlushDiskType.SYNC_FLUSH,
            cfg.flushIntervalCommitLog / 1000)
        self._flusher.observe = self._flush_observer
        self._flusher.start()
        self._maintenance = asyncio.Lock()
        loop = asyncio.get_running_loop()
        self._tasks = [
            self._dispatch.start(),
            loop.create_task(self._every(cfg.flushIntervalConsumeQueue, self.flush_queues),
                             name="store-checkpoint"),
            loop.create_task(self._every(cfg.flushConsumerOffsetInterval, self._persist_offsets),
                             name="store-offsets"),
            loop.create_task(self._every(cfg.cleanResourceInterval, self._clean),
                             name="store-retention"),
        ]
        self._running = True

    async def shutdown(self) -> None:
        if not self._running:
            self.close()
            return
        self._running = False
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._flusher is not None:
            await self._flusher.stop()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._io_pool, self.close)
        for pool in (self._flush_pool, self._io_pool):
            if pool is not None:
                pool.shutdown(wait=True)

    @staticmethod
    async def _every(interval_ms: int, job: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                result = job()
                if asyncio.iscoroutine(result):
                    await result
            except Exception:
                log.exception("store maintenance job failed")

    # writes
    def _write_refusal(self) -> tuple[PutStatus, str] | None:
        """Why no write may be taken now (stopped, disk full, replication says no), or None."""
        if not self._running or self._flusher is None:
            return PutStatus.SERVICE_NOT_AVAILABLE, "store not running"
        if self._retention.disk_full:
            return PutStatus.SERVICE_NOT_AVAILABLE, "disk full"
        return self.write_gate.refuse_write() if self.write_gate is not None else None

    async def put_message(self, rec: MessageRecord) -> PutResult:
        return (await self.put_messages([rec]))[0]

    async def put_messages(self, recs: Sequence[MessageRecord]) -> list[PutResult]:
        """One batch: consecutive commitlog positions and queue offsets, one flush wait."""
        refusal = self._write_refusal()
        if refusal is not None:
            return [PutResult(refusal[0], remark=refusal[1]) for _ in recs]
        if self.writer is not None:
            return await self.writer.put_messages(recs)
        results, end = self.append_records(recs, int(self._clock() * 1000))
        if end is not None:
            status = await self._wait_durable(end)
            if status is not PutStatus.PUT_OK:
                results = [replace(r, status=status) if r.status is PutStatus.PUT_OK else r
                           for r in results]
        return results

    def append_records(self, recs: Sequence[MessageRecord], now_ms: int,
                       store_host: str | None = None) -> tuple[list[PutResult], int | None]:
        """Append now (no flush wait): the results as stored, and the end of what was
        written (None if nothing was). State machines that replicate writes call this
        with the timestamp the group agreed on, so every replica writes the same bytes."""
        cfg = self.config
        results: list[PutResult | None] = [None] * len(recs)
        batch = []
        slots = []
        store_host = store_host or cfg.storeHost
        segment_size = self._commitlog.segment_size
        for i, parts in enumerate(codec.prepare_all(recs, store_host)):
            problem = validate(parts, cfg, segment_size)
            if problem is not None:
                results[i] = PutResult(problem[0], remark=problem[1])
            else:
                batch.append(parts)
                slots.append(i)
        end: int | None = None
        if batch:
            caught_up = self._dispatch_caught_up()
            try:
                appended = self._commitlog.append(batch, now_ms)
            except OSError as exc:
                for i in slots:
                    results[i] = PutResult(PutStatus.UNKNOWN_ERROR, remark=str(exc))
                return [r for r in results if r is not None], None
            self._appended(caught_up)
            end = appended[-1].commitlog_offset + appended[-1].size
            host_prefix = codec.offset_msg_id(store_host, 0)[:-16]
            for i, parts, a in zip(slots, batch, appended, strict=True):
                off_id = f"{host_prefix}{a.commitlog_offset:016X}"
                results[i] = PutResult(
                    PutStatus.PUT_OK, parts.rec.properties.get(PROPERTY_UNIQ_KEY) or off_id,
                    a.queue_offset, a.commitlog_offset, a.size, now_ms, off_id)
        return [r for r in results if r is not None], end

    async def put_batch(self, batch: RawBatch) -> BatchPutResult:
        """One queue's batch (all or nothing): consecutive offsets, one write, one flush wait."""
        refusal = self._write_refusal()
        if refusal is not None:
            return BatchPutResult(refusal[0], remark=refusal[1])
        if self.writer is not None:
            return await self.writer.put_batch(batch)
        result = self.append_raw_batch(batch, int(self._clock() * 1000), self.config.storeHost)
        if result.status is not PutStatus.PUT_OK:
            return result
        last = result.commitlog_offsets[-1] + result.sizes[-1]
        result.status = await self._wait_durable(last)
        return result

    async def put_batches(self, batches: Sequence[RawBatch]) -> list[BatchPutResult]:
        """Batches of several requests (a pipelining producer's burst), each all or
        nothing: one commitlog write and one wait for the flush and the replicas serve
        them all; a replicated writer takes them (``ReplicatedWriter.put_batches``)."""
        if len(batches) == 1:
            return [await self.put_batch(batches[0])]
        refusal = self._write_refusal()
        if refusal is not None:
            return [BatchPutResult(refusal[0], remark=refusal[1]) for _ in batches]
        if self.writer is not None:
            return await self.writer.put_batches(batches)
        results = self.append_raw_batches(batches, int(self._clock() * 1000),
                                          self.config.storeHost)
        ok = PutStatus.PUT_OK  # (a member lookup on an Enum class is a descriptor call)
        ends = [r.next_commitlog_offset for r in results if r.status is ok]
        if ends:
            status = await self._wait_durable(max(ends))
            if status is not ok:
                for r in results:
                    if r.status is ok:
                        r.status = status
        return results

    def append_raw_batches(self, batches: Sequence[RawBatch], now_ms: int,
                           store_host: str) -> list[BatchPutResult]:
        """``append_raw_batch`` for each, with one commitlog write when they fit the
        segment being written; a refused batch does not hold up the others."""
        cfg = self.config
        cl = self._commitlog
        results: list[BatchPutResult | None] = [None] * len(batches)
        encs = []
        for i, batch in enumerate(batches):
            enc, problem = check_batch(batch, store_host, cfg.maxMessageSize,
                                       cfg.maxPropertiesSize, cl.segment_size)
            if enc is None:
                assert problem is not None
                results[i] = BatchPutResult(problem[0], remark=problem[1])
            else:
                encs.append((i, enc))
        if encs:
            caught_up = self._dispatch_caught_up()
            try:
                written = cl.append_batches([enc for _, enc in encs], now_ms)
            except OSError as exc:
                for i, _ in encs:
                    results[i] = BatchPutResult(PutStatus.UNKNOWN_ERROR, remark=str(exc))
            else:
                if written is not None:
                    self._appended(caught_up)
                    ok = PutStatus.PUT_OK
                    for (i, enc), (first, offsets) in zip(encs, written, strict=True):
                        results[i] = BatchPutResult(ok, first, offsets, enc.sizes, now_ms)
                else:  # crossing into the next segment: one by one
                    for i, _ in encs:
                        results[i] = self.append_raw_batch(batches[i], now_ms, store_host)
        return [r for r in results if r is not None]

    def append_raw_batch(self, batch: RawBatch, now_ms: int, store_host: str) -> BatchPutResult:
        """Append one queue's batch now (no flush wait). State machines that replicate
        writes call this with the timestamp and store host the group agreed on, so every
        replica writes the same bytes."""
        cfg = self.config
        cl = self._commitlog
        enc, problem = check_batch(batch, store_host, cfg.maxMessageSize,
                                   cfg.maxPropertiesSize, cl.segment_size)
        if enc is None:
            assert problem is not None
            return BatchPutResult(problem[0], remark=problem[1])
        caught_up = self._dispatch_caught_up()
        try:
            first, offsets = cl.append_batch(enc, now_ms)
        except OSError as exc:
            return BatchPutResult(PutStatus.UNKNOWN_ERROR, remark=str(exc))
        self._appended(caught_up)
        return BatchPutResult(PutStatus.PUT_OK, first, offsets, enc.sizes, now_ms)

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the commitlog's next message of that queue gets."""
        return self._commitlog.next_queue_offset(topic, queue_id)

    def _dispatch_caught_up(self) -> bool:
        """Before a local append: whether to dispatch it in the appender's own turn (the
        dispatcher is at the end; with SYNC_FLUSH it batches while producers wait for
        the fsync instead)."""
        return (self._dispatcher.offset == self._commitlog.max_offset
                and self.config.flushDiskType is FlushDiskType.ASYNC_FLUSH)

    def _appended(self, dispatch_now: bool) -> None:
        if dispatch_now:
            self._dispatch.dispatch_now()
        else:
            self._dispatch.wake()
        self._notify_append()

    async def _wait_durable(self, end: int) -> PutStatus:
        """The flush the config promises, then the replicas' acks the gate asks for."""
        cfg = self.config
        if (cfg.flushDiskType is FlushDiskType.SYNC_FLUSH and self._flusher is not None
                and not await self._flusher.wait_flushed(end, cfg.syncFlushTimeout / 1000)):
            return PutStatus.FLUSH_DISK_TIMEOUT
        if self.write_gate is not None and not await self.write_gate.wait_acked(end):
            return PutStatus.FLUSH_SLAVE_TIMEOUT
        return PutStatus.PUT_OK

    # dispatch
    def _dispatch_limit(self) -> int:
        limit = self._commitlog.max_offset
        return limit if self._confirm_offset is None else min(limit, self._confirm_offset)

    async def wait_dispatched(self, commitlog_offset: int | None = None) -> None:
        """Wait until everything below ``commitlog_offset`` (default: max) is dispatched."""
        target = self._commitlog.max_offset if commitlog_offset is None else commitlog_offset
        await self._dispatch.wait(target)

    def add_append_listener(self, listener: AppendListener) -> None:
        """``listener(commitlog_max_offset)`` after every local append (before any fsync)."""
        self._append_listeners.append(listener)

    def _notify_append(self) -> None:
        end = self._commitlog.max_offset
        for listener in self._append_listeners:
            try:
                listener(end)
            except Exception:
                log.exception("append listener failed")

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """``listener(topic, queue_id, max_offset)`` after new entries reach a consume queue."""
        self._dispatcher.listeners.append(listener)

    # reads
    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        filter: MessageFilter | None = None,
    ) -> GetResult:
        cfg = self.config
        return get_messages(self._commitlog, self._queues.get(topic, queue_id), offset,
                            max_count, filter, cfg.maxTransferBytesOnMessageInMemory,
                            cfg.maxFilterMessageCount)

    def get_message_by_offset(self, commitlog_offset: int) -> StoredMessage | None:
        return self._commitlog.read_message(commitlog_offset)

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get(topic, queue_id)
        return 0 if cq is None else cq.min_offset

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The next queue offset to be dispatched (RocketMQ ``getMaxOffsetInQueue``)."""
        cq = self._queues.get(topic, queue_id)
        return 0 if cq is None else cq.max_offset

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset whose store timestamp is >= ``timestamp_ms`` (or max offset)."""
        cq = self._queues.get(topic, queue_id)
        if cq is None:
            return 0
        cl = self._commitlog

        def stored_at(e: CqEntry) -> int:
            ts = cl.store_timestamp_at(e.commitlog_offset)
            return -1 if ts is None else ts

        return cq.first_at_or_after(stored_at, timestamp_ms)

    def queues(self) -> list[tuple[str, int]]:
        """Every (topic, queue id) that has a consume queue."""
        return sorted(self._queues.queues)

    @property
    def commitlog_min_offset(self) -> int:
        return self._commitlog.min_offset

    @property
    def commitlog_max_offset(self) -> int:
        return self._commitlog.max_offset

    @property
    def flushed_offset(self) -> int:
        return self._commitlog.flushed_offset

    def observe_flushes(self, observe: Callable[[float], None]) -> None:
        """``observe(seconds)`` after every commitlog fsync round (for the metrics)."""
        self._flush_observer = observe
        if self._flusher is not None:
            self._flusher.observe = observe

    @property
    def flush_rounds(self) -> int:
        """Commitlog fsync rounds since start (each serves every producer waiting for it)."""
        return self._flusher.rounds if self._flusher is not None else 0

    @property
    def dispatched_offset(self) -> int:
        return self._dispatcher.offset

    @property
    def dispatch_behind_bytes(self) -> int:
        return max(0, self._dispatch_limit() - self._dispatcher.offset)

    @property
    def disk_full(self) -> bool:
        return self._retention.disk_full

    # replication hooks (HA)
    @property
    def confirm_offset(self) -> int | None:
        """Dispatch stops here when set (controller mode); ``None`` = dispatch everything."""
        return self._confirm_offset

    def set_confirm_offset(self, offset: int | None) -> None:
        self._confirm_offset = offset
        self._dispatch.wake()

    def confirm_to(self, offset: int, dispatch_now: bool) -> None:
        """Move the confirm offset on to ``offset`` (never back); ``dispatch_now``: add
        the consume-queue entries in this turn (someone waits for them)."""
        if self._confirm_offset is not None and offset <= self._confirm_offset:
            return
        self._confirm_offset = offset
        if dispatch_now:
            self._dispatch.dispatch_now()
        else:
            self._dispatch.wake()

    def commitlog_syncer(self, start: int, end: int) -> Callable[[], None]:
        """What fsyncs the commitlog's ``[start, end)`` from any thread: it holds its
        own descriptors of those segments, so a truncation meanwhile cannot close them
        under the fsync (it closes them when done)."""
        fds = [os.dup(seg.fd) for seg in self._commitlog.files.between(start, end)
               if seg.fd >= 0] if end > start else []
        fsync = self._fsync

        def sync() -> None:
            try:
                for fd in fds:
                    fsync(fd)
            finally:
                for fd in fds:
                    os.close(fd)
        return sync

    def cut_commitlog(self, offset: int) -> None:
        """``truncate_commitlog`` now, on the loop's thread, for a tail nothing was
        dispatched from (a DLedger log cutting entries that were never committed)."""
        if offset < self._dispatcher.offset:
            raise ValueError(f"cannot cut the commitlog at {offset}: dispatched up to "
                             f"{self._dispatcher.offset}")
        self._cut(offset)

    def read_commitlog(self, offset: int, max_bytes: int) -> bytes:
        """Raw commitlog bytes from ``offset``, never crossing a segment end."""
        return self._commitlog.read(offset, max_bytes)

    def commitlog_region(self, offset: int, max_bytes: int) -> tuple[int, int, int] | None:
        """Where ``read_commitlog(offset, max_bytes)`` would read: ``(fd, position,
        length)``, for ``os.sendfile``; valid until the event loop runs again."""
        return self._commitlog.region(offset, max_bytes)

    async def append_commitlog(self, offset: int, data: bytes) -> bool:
        """Slave side: append raw bytes replicated from the master at ``offset``.

        Returns ``False`` when ``offset`` is not the current end (an empty store accepts
        any segment start). With SYNC_FLUSH it returns once the bytes are fsynced.
        """
        if not self.append_replicated(offset, data):
            return False
        return await self.wait_replicated_durable(offset + len(data))

    def append_replicated(self, offset: int, data: bytes | memoryview,
                          batches: Sequence[BuiltBatch] | None = None) -> bool:
        """``append_commitlog`` without the flush wait (``wait_replicated_durable``).
        ``batches``: the producer batches among those bytes (their records need not be
        given), whose consume-queue entries the dispatcher then takes without reading
        the records back."""
        was_empty = self._commitlog.files.empty
        if not self._commitlog.append_raw(offset, data, keep_recent=batches is not None):
            return False
        if batches:
            self._commitlog.remember_built(batches)
        if was_empty:
            self._dispatcher.offset = offset
        self._dispatch.wake()
        return True

    @property
    def replicated_writes_wait_flush(self) -> bool:
        """SYNC_FLUSH: replicated bytes count as written only once fsynced."""
        return self.config.flushDiskType is FlushDiskType.SYNC_FLUSH and self._flusher is not None

    async def wait_replicated_durable(self, end: int) -> bool:
        """True once everything below ``end`` is as durable as flushDiskType promises."""
        if self.replicated_writes_wait_flush and self._flusher is not None:
            return await self._flusher.wait_flushed(end, self.config.syncFlushTimeout / 1000)
        return True

    def is_record_start(self, offset: int) -> bool:
        """Whether the commitlog can be cut at ``offset`` without tearing a record."""
        return self._commitlog.is_record_start(offset)

    @property
    def complete_offset(self) -> int:
        """End of the last whole message: where a replica cuts before becoming master."""
        cl = self._commitlog
        dispatched = self._dispatcher.offset
        if cl.accounted_to < dispatched:
            # Replicated bytes the dispatcher has already read: the consume queues know
            # their queue offsets, so only what lies past them is scanned (a replica
            # taking over after a long run would otherwise read its whole log again).
            cl.reset_queue_offsets(self._queues.max_offsets(), dispatched)
        return cl.complete_offset()

    async def truncate_commitlog(self, offset: int | None) -> None:
        """Cut the commitlog (and consume queues) back to ``offset``, a message boundary;
        ``None`` deletes every segment (a replica that copies the master afresh)."""
        async with contextlib.AsyncExitStack() as stack:
            if self._flusher is not None:
                await stack.enter_async_context(self._flusher.lock)
            if self._maintenance is not None:
                await stack.enter_async_context(self._maintenance)
            self._cut(offset)

    def _cut(self, offset: int | None) -> None:
        cl = self._commitlog
        log.warning("truncating commitlog from %d to %s", cl.max_offset,
                    "nothing" if offset is None else offset)
        if offset is None:
            cl.clear()
        else:
            cl.truncate(offset)
        self._queues.truncate_dirty(cl.max_offset)
        self._dispatcher.offset = min(self._dispatcher.offset, cl.max_offset)
        cl.reset_queue_offsets(self._queues.max_offsets(), self._dispatcher.offset)
        if self._confirm_offset is not None:
            self._confirm_offset = min(self._confirm_offset, cl.max_offset)
        self._write_checkpoint(self._dispatcher.offset,
                               self._dispatcher.last_store_timestamp,
                               cl.last_store_timestamp)

    # maintenance
    def _write_checkpoint(self, logics_offset: int, logics_ts: int, physic_ts: int) -> None:
        """Fsync the consume queues, then record how far everything is on disk."""
        self._queues.flush(self._fsync)
        cl = self._commitlog
        cp = Checkpoint(
            physic_msg_timestamp=physic_ts, logics_msg_timestamp=logics_ts,
            physic_offset=cl.flushed_offset, logics_offset=logics_offset,
            master_flushed_offset=cl.flushed_offset,
            confirm_phy_offset=self._confirm_offset or 0)
        save_checkpoint(self.config.checkpoint_path, cp)

    async def flush_queues(self) -> None:
        """Fsync the consume queues and write the checkpoint."""
        assert self._maintenance is not None
        async with self._maintenance:
            d = self._dispatcher
            ts = self._flusher.flushed_timestamp if self._flusher else 0
            await asyncio.get_running_loop().run_in_executor(
                self._io_pool, self._write_checkpoint, d.offset, d.last_store_timestamp, ts)

    async def flush(self) -> None:
        """Fsync the commitlog and consume queues, then write the checkpoint."""
        if self._flusher is not None:
            await self._flusher.flush_now()
        await self.wait_dispatched(min(self._commitlog.max_offset, self._dispatch_limit()))
        await self.flush_queues()

    async def _persist_offsets(self) -> None:
        if self.offsets.dirty:
            await asyncio.get_running_loop().run_in_executor(self._io_pool, self.offsets.persist)

    async def _clean(self) -> None:
        assert self._maintenance is not None
        async with self._maintenance:
            self.clean_expired_files()

    def clean_expired_files(self) -> CleanResult:
        """One retention round (deleted segments, disk usage, whether the disk is full)."""
        safe = min(self._commitlog.flushed_offset, self._dispatcher.offset)
        return self._retention.run(safe)
