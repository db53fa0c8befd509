"""DLedger mode (``enableDLegerCommitLog=true``): the group's Raft log carries every write.

The leader encodes each write's commitlog records once, where every replica's
commitlog will hold them (``broker.dledger_builder``), and proposes them as one entry
(``ha.dledger_entry``). Every replica writes those bytes into its commitlog as it
appends the entry, and its Raft log keeps only a reference to them
(``ha.dledger_log``): each message is written once per replica. The consume queues
(and so consumers) see an entry's messages once it commits: applying it moves the
store's confirm offset to its end. The Raft leader is the master: it registers as
brokerId 0, the others as ``1 + their position in dLegerPeers``, and every leadership
change re-registers at once. ``preferredLeaderIds`` makes leadership return to the
preferred replica once it has caught up (DLedger's leadership transfer).

Each stored message carries ``DLEDGER_INDEX=<entry index>.<position>``. The Raft log is
kept whole (no snapshots): the store is the state it builds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any

from mqcluster.broker.config import MASTER_ID, BrokerConfig
from mqcluster.broker.context import BrokerContext, ReplicaRole
from mqcluster.broker.dledger_builder import EntryBuilder
from mqcluster.broker.slave_sync import MetadataSync
from mqcluster.client.dledger import DLedgerClient
from mqcluster.common.wallclock import wall_ms
from mqcluster.ha.dledger_entry import (
    ENTRY_VERSION,
    PROPERTY_DLEDGER_INDEX,
    encode_region,
    encode_runs,
    mark_positions,
    region_end,
)
from mqcluster.ha.dledger_log import DLedgerLog
from mqcluster.protocol.dledger import DLedgerRequestCode, encode_addresses
from mqcluster.protocol.properties import PROPERTY_UNIQ_KEY
from mqcluster.raft.diskformat import RaftStoreError
from mqcluster.raft.node import (
    ProposalError,
    RaftNotLeaderError,
    RaftRunner,
    RaftStatus,
    RunnerOptions,
)
from mqcluster.raft.types import (
    Entry,
    NotLeaderError,
    RaftConfig,
    Role,
    TransferInProgressError,
)
from mqcluster.store import codec
from mqcluster.store.api import MessageStore
from mqcluster.store.batch import BatchPutResult, RawBatch, check_batch
from mqcluster.store.errors import StoreLayoutError
from mqcluster.store.message import MessageRecord, PutResult, PutStatus
from mqcluster.store.validation import validate
from mqcluster.wire.frame import RemotingCommand, ResponseCode
from mqcluster.wire.rpc import Connection, HandlerRegistry, RpcError

log = logging.getLogger(__name__)

__all__ = ["PROPERTY_DLEDGER_INDEX", "DLedgerReplication", "DLedgerStateMachine"]

DLEDGER_CACHED_LOG_BYTES = 64 * 1024 * 1024
GROUP_BYTES = 1024 * 1024
"""Batches gathered for one entry stop once their records span this many bytes."""
GROUPS_IN_FLIGHT = 1
"""Entries of gathered batches proposed and not yet applied before the next waits: a
batch arriving meanwhile joins the entry being gathered, which is proposed when the
one in flight is done (or once it spans ``GROUP_BYTES``). Under load an entry then
carries what arrived during one commit instead of during one turn of the loop, so the
cost each replica pays per entry (Raft bookkeeping, a write, an fsync, an ack) is
shared by many more messages; an idle leader still proposes at the end of the turn."""
READY_WAIT_S = 3.0
"""How long a new leader's first writes wait for its log to be applied (until then it
cannot tell where their records go) before they are refused."""

Results = list[BatchPutResult] | list[PutResult]


class DLedgerStateMachine:
    """Applying an entry lets the consume queues go to the end of its records (written
    when it was appended); a leader's own proposals answer their producers."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.leading = False
        """A leader's producers wait for their messages' consume-queue entries; a
        follower's are added in bulk."""
        # A leader's own proposals, by the identity of their data (the entry carries the
        # very same bytes object): what each producer is answered.
        self._proposed: dict[int, tuple[bytes, Results]] = {}

    def expect(self, data: bytes, results: Results) -> None:
        self._proposed[id(data)] = (data, results)

    def forget(self, data: bytes) -> None:
        self._proposed.pop(id(data), None)

    def apply(self, entry: Entry) -> Results | None:
        if not entry.data:
            return None
        # (an entry of another release raises: the runner stops rather than skip it)
        self.store.confirm_to(region_end(entry.data), self.leading)
        own = self._proposed.pop(id(entry.data), None)
        return own[1] if own is not None and own[0] is entry.data else None

    def snapshot(self) -> bytes:
        raise RuntimeError("a DLedger commitlog takes no snapshots: the store is its state")

    def restore(self, data: bytes) -> None:
        raise RuntimeError("a DLedger commitlog takes no snapshots: the store is its state")


def preferred_leaders(cfg: BrokerConfig) -> list[str]:
    ids = [i.strip() for i in (cfg.preferredLeaderIds or "").replace(";", ",").split(",")]
    return [i for i in ids if i] or ([cfg.preferredLeaderId] if cfg.preferredLeaderId else [])


class DLedgerReplication:
    def __init__(self, ctx: BrokerContext, registry: HandlerRegistry) -> None:
        self.ctx = ctx
        cfg = ctx.config
        assert cfg.dLegerSelfId is not None
        peers = cfg.dledger_peers
        self.self_id = cfg.dLegerSelfId
        self.follower_id = 1 + list(peers).index(self.self_id)
        store = ctx.store
        self.builder = EntryBuilder()
        self.state_machine = DLedgerStateMachine(store)
        raft_dir = Path(cfg.storePathDLedgerCommitLog
                        or Path(cfg.storePathRootDir) / "dledger")
        self.runner = RaftRunner(
            self.self_id, peers, raft_dir, self.state_machine,
            RaftConfig(preferred_leader_ids=preferred_leaders(cfg),
                       max_transfer_gap=cfg.dLegerPreferredLeaderGap,
                       heartbeat_interval=cfg.heartBeatTimeIntervalMs / 1000,
                       max_heartbeat_leak=cfg.maxHeartBeatLeak),
            # Entries are written (into the commitlog, which the loop owns) on the
            # loop's thread and fsynced in the I/O thread: the replicas of a group often
            # share a disk, and an fsync on the loop's thread would hold up applying and
            # serving meanwhile. A replica starved of CPU (replicas and clients often
            # share a few cores) must not take its own pause for the leader's silence.
            # The log is never compacted (the store is its state): only its newest
            # entries stay in memory.
            options=RunnerOptions(snapshot_every=0, write_on_loop=True,
                                  max_clock_gap=0.05,
                                  max_cached_log_bytes=DLEDGER_CACHED_LOG_BYTES),
            log_factory=lambda: DLedgerLog(raft_dir, store))
        self.runner.registry.register(DLedgerRequestCode.BROKER_ADDRESSES, self._addresses)
        self.runner.on_role_change.append(self._role_changed)
        registry.register(DLedgerRequestCode.DLEDGER_STATUS, self._status)
        registry.register(DLedgerRequestCode.DLEDGER_TRANSFER_LEADERSHIP, self._transfer)
        self.peers_api = DLedgerClient(connect_timeout=1.0)
        self._following: asyncio.Task[None] | None = None
        self.proposed_built = self.proposed_other = 0
        # Producer batches placed in the entry being gathered, each with its result
        # and its producer's waiter; and how many such entries are proposed, not
        # yet applied.
        self._group: list[tuple[BatchPutResult, asyncio.Future[BatchPutResult]]] = []
        self._group_index = 0  # the index the entry being gathered is expected to get
        self._groups_in_flight = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        store.writer = self
        # Topics, groups and offsets live beside the commitlog, not in the Raft log: the
        # followers copy them from the leader, so a new leader knows them.
        self.metadata = MetadataSync(ctx, cfg.slaveSyncInterval)
        ctx.set_role(ReplicaRole(self.follower_id, False))

    async def start(self) -> None:
        try:
            await self.runner.start()
        except RaftStoreError as exc:
            # The Raft log is this mode's commitlog: mqbroker stops with that one line.
            raise StoreLayoutError(str(exc)) from None
        self.metadata.start()

    async def stop(self) -> None:
        await self.metadata.stop()
        if self._following is not None:
            self._following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._following
        await self.runner.stop()
        await self.peers_api.close()

    # ---- writes -------------------------------------------------------------------

    async def _ready(self) -> BatchPutResult | None:
        """None once the builder follows this leader's log; else why writes are refused.
        A new leader (or one whose proposal failed) first waits until its log is
        applied: only then does its commitlog end where its next records go."""
        runner, builder = self.runner, self.builder
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_WAIT_S
        while not builder.ready:
            if not runner.is_leader:
                return _refusal(runner.not_leader_error())
            if runner.applied_everything:
                builder.start_from(self.ctx.store.commitlog_max_offset)
                break
            try:
                await asyncio.wait_for(runner.wait_applied(runner.next_index() - 1),
                                       max(0.0, deadline - loop.time()))
            except (TimeoutError, ProposalError) as exc:
                return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE,
                                      remark=f"DLedger leader not ready for writes: {exc}")
        return None

    async def put_messages(self, recs: Sequence[MessageRecord]) -> list[PutResult]:
        """Messages of any kind (single sends, transactional ones) as one entry."""
        refusal = await self._ready()
        if refusal is not None:
            return [PutResult(refusal.status, remark=refusal.remark) for _ in recs]
        self._flush_group()  # (what is gathered goes first)
        if not self.builder.ready:  # (it was refused)
            return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE,
                              remark="the DLedger leader lost track of its log") for _ in recs]
        index, store, host, now_ms = (self.runner.next_index(), self.ctx.store,
                                      self.ctx.addresses.broker, wall_ms())
        for i, rec in enumerate(recs):
            rec.properties[PROPERTY_DLEDGER_INDEX] = f"{index}.{i}"
        cfg = store.config
        segment_size = cfg.mappedFileSizeCommitLog
        host_prefix = codec.offset_msg_id(host, 0)[:-16]
        results: list[PutResult] = []
        for parts in codec.prepare_all(recs, host):
            problem = validate(parts, cfg, segment_size)
            placed = None if problem is not None else self.builder.place_record(
                parts, now_ms, store.next_queue_offset, segment_size)
            if placed is None:
                status, remark = problem or (PutStatus.MESSAGE_ILLEGAL, "fits no segment")
                results.append(PutResult(status, remark=remark))
                continue
            offset, queue_offset = placed
            off_id = f"{host_prefix}{offset:016X}"
            results.append(PutResult(PutStatus.PUT_OK,
                                     parts.rec.properties.get(PROPERTY_UNIQ_KEY) or off_id,
                                     queue_offset, offset, parts.size, now_ms, off_id))
        if not self.builder.gathered:
            return results
        start, region, _ = self.builder.take()
        data = encode_region(start, region)
        self.proposed_other += 1
        sm = self.state_machine
        sm.expect(data, results)
        try:
            (stored,) = await self.runner.submit([data])
        except (RaftNotLeaderError, ProposalError) as exc:
            self.builder.reset()
            refused = _refusal(exc)
            return [r if not r.ok else PutResult(refused.status, remark=refused.remark)
                    for r in results]
        finally:
            sm.forget(data)
        assert isinstance(stored, list)
        return stored

    async def put_batch(self, batch: RawBatch) -> BatchPutResult:
        """One queue's batch: its records encoded once, by the leader, where every
        replica will store them, and sent with the other batches gathered meanwhile as
        one entry (``GROUPS_IN_FLIGHT``)."""
        return (await self.put_batches([batch]))[0]

    async def put_batches(self, batches: Sequence[RawBatch]) -> list[BatchPutResult]:
        """``put_batch`` of each, entered in order on this turn: a pipelining producer's
        burst joins the entry being gathered without a task per batch."""
        refusal = await self._ready()
        if refusal is not None:
            return [refusal for _ in batches]
        started = [self._enter(batch) for batch in batches]
        return [r if isinstance(r, BatchPutResult) else await r for r in started]

    def _enter(self, batch: RawBatch) -> BatchPutResult | Awaitable[BatchPutResult]:
        """Place ``batch`` in the entry being gathered now; its result, or what gives it."""
        builder = self.builder
        if not builder.ready:  # a proposal failed meanwhile
            return _refusal(ProposalError("the DLedger leader lost track of its log"))
        if builder.gathered >= GROUP_BYTES:
            self._flush_group()
        now_ms, host, store = wall_ms(), self.ctx.addresses.broker, self.ctx.store
        if not self._group:
            self._group_index = self.runner.next_index()
        first_position = sum(len(r.sizes) for r, _ in self._group)
        marked = batch.with_properties(mark_positions(batch.properties, self._group_index,
                                                      first_position))
        cfg = store.config
        enc, problem = check_batch(marked, host, cfg.maxMessageSize, cfg.maxPropertiesSize,
                                   cfg.mappedFileSizeCommitLog)
        if enc is None:  # refused before it enters the log
            assert problem is not None
            return BatchPutResult(problem[0], remark=problem[1])
        built = builder.place(enc, now_ms, store.next_queue_offset, cfg.mappedFileSizeCommitLog)
        if built is None:
            return BatchPutResult(PutStatus.MESSAGE_ILLEGAL,
                                  remark=f"a batch of {sum(enc.sizes)} bytes fits no segment")
        self.proposed_built += 1
        result = BatchPutResult(PutStatus.PUT_OK, built.first_queue_offset, built.offsets,
                                built.sizes, built.store_timestamp)
        return self._join_group(result)

    def _join_group(self, result: BatchPutResult) -> asyncio.Future[BatchPutResult]:
        """Add a placed batch to the entry being gathered, proposed at the end of this
        loop turn, or once the entries in flight are done (``GROUPS_IN_FLIGHT``)."""
        loop = self._loop
        if loop is None:  # (looked up once: on Python 3.11 each lookup is a getpid call)
            loop = self._loop = asyncio.get_running_loop()
        if not self._group and self._groups_in_flight < GROUPS_IN_FLIGHT:
            loop.call_soon(self._flush_group)
        waiter: asyncio.Future[BatchPutResult] = loop.create_future()
        self._group.append((result, waiter))
        return waiter

    def _flush_group(self) -> None:
        """Propose the gathered batches as one entry (before anything proposed after
        them: their records come first in every commitlog)."""
        if not self._group:
            return
        if not self.builder.ready:  # this leader's term ended, or a proposal failed
            self._group_failed([], self.runner.not_leader_error() if not self.runner.is_leader
                               else ProposalError("the DLedger leader lost track of its log"))
            return
        results = [result for result, _ in self._group]
        waiters = [waiter for _, waiter in self._group]
        self._group = []
        start, region, runs = self.builder.take()
        data = encode_region(start, region, encode_runs(runs))
        sm = self.state_machine
        sm.expect(data, results)
        try:
            proposed = self.runner.submit([data])
        except (RaftNotLeaderError, ProposalError) as exc:
            sm.forget(data)
            self._group_failed(waiters, exc)
            return
        self._groups_in_flight += 1
        proposed.add_done_callback(functools.partial(self._group_done, data, waiters))

    def _group_done(self, data: bytes, waiters: list[asyncio.Future[BatchPutResult]],
                    proposed: asyncio.Future[list[Any]]) -> None:
        self.state_machine.forget(data)
        self._groups_in_flight -= 1
        if self._group and self._groups_in_flight < GROUPS_IN_FLIGHT:
            self._flush_group()
        if proposed.cancelled():
            self._group_failed(waiters, ProposalError("proposal cancelled"))
            return
        exc = proposed.exception()
        if exc is not None:
            self._group_failed(waiters, exc)
            return
        for waiter, result in zip(waiters, proposed.result()[0], strict=True):
            if not waiter.done():
                waiter.set_result(result)

    def _group_failed(self, waiters: list[asyncio.Future[BatchPutResult]],
                      exc: BaseException) -> None:
        # Whatever was placed after it is refused too: its place may never be reached.
        self.builder.reset()
        refusal = _refusal(exc)
        for waiter in waiters + [waiter for _, waiter in self._group]:
            if not waiter.done():
                waiter.set_result(refusal)
        self._group = []

    # ---- roles ----------------------------------------------------------------------

    def _role_changed(self, status: RaftStatus) -> None:
        if self._following is not None:
            self._following.cancel()
            self._following = None
        self.builder.reset()
        self.state_machine.leading = status.role is Role.LEADER
        if status.role is Role.LEADER:
            addrs = self.ctx.addresses
            self.ctx.set_role(ReplicaRole(MASTER_ID, True, addrs.broker, addrs.grpc,
                                          status.term))
            log.info("DLedger leader of term %d: serving writes", status.term)
            return
        self.ctx.set_role(ReplicaRole(self.follower_id, False, None, None, status.term))
        if status.leader_addr:
            self._following = asyncio.get_running_loop().create_task(
                self._learn_leader(status.leader_addr, status.term))

    async def _learn_leader(self, raft_addr: str, term: int) -> None:
        """Ask the leader (on its Raft address) where it serves brokers and clients."""
        while True:
            try:
                addrs = await self.peers_api.addresses(raft_addr, 1.0)
                self.ctx.set_role(ReplicaRole(self.follower_id, False, addrs.get("broker"),
                                              addrs.get("grpc"), term))
                return
            except (RpcError, ValueError) as exc:
                log.info("leader at %s not answering yet (%s)", raft_addr, exc)
                await asyncio.sleep(0.2)

    async def _addresses(self, cmd: RemotingCommand, _c: Connection) -> RemotingCommand:
        addrs = self.ctx.addresses
        return cmd.response(body=encode_addresses(addrs.broker, addrs.grpc, ENTRY_VERSION))

    async def _status(self, cmd: RemotingCommand, _c: Connection) -> RemotingCommand:
        answer = self.runner.status().to_json()
        # how many producer batches (gathered into entries) and entries of single
        # messages this replica proposed as leader
        answer.update(proposedBuilt=self.proposed_built, proposedOther=self.proposed_other)
        return cmd.response(body=json.dumps(answer).encode())

    async def _transfer(self, cmd: RemotingCommand, _c: Connection) -> RemotingCommand:
        target = (cmd.ext_fields or {}).get("peerId", "")
        try:
            self.runner.transfer_leadership(target)
        except (TransferInProgressError, ValueError) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        except NotLeaderError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                remark=f"not the DLedger leader (leader: {exc.leader_id})")
        return cmd.response(remark=f"transferring leadership to {target}")


def _refusal(exc: BaseException) -> BatchPutResult:
    if isinstance(exc, RaftNotLeaderError):
        return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE,
                              remark=f"not the DLedger leader (leader: {exc.leader_id})")
    return BatchPutResult(PutStatus.FLUSH_SLAVE_TIMEOUT, remark=str(exc))
