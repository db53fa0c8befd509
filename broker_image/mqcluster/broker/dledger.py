"""DLedger mode (``enableDLegerCommitLog=true``): the group's Raft log carries every write.

A write is proposed to the Raft group as one entry (``ha.dledger_entry``); once a
majority has it, every replica applies it to its store in log order, so consume
queues only ever see committed messages and every replica writes the same bytes.
The Raft leader is the master: it registers as brokerId 0, the others as
``1 + their position in dLegerPeers``, and every leadership change re-registers at
once. ``preferredLeaderIds`` makes leadership return to the preferred replica once it
has caught up (seed 002).

Each stored message carries ``DLEDGER_INDEX=<entry index>.<position>``: after a crash
the replica finds the last one it applied and resumes after it, so nothing is stored
twice. The Raft log is kept whole (no snapshots): the store is the state it builds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from mqcluster.broker.config import MASTER_ID, BrokerConfig
from mqcluster.broker.context import BrokerContext, ReplicaRole
from mqcluster.broker.dledger_builder import EntryBuilder
from mqcluster.broker.slave_sync import MetadataSync
from mqcluster.client.dledger import DLedgerClient
from mqcluster.common.wallclock import wall_ms
from mqcluster.ha.dledger_entry import (
    BUILT_VERSION,
    ENTRY_VERSION,
    PROPERTY_DLEDGER_INDEX,
    BuiltEntry,
    BuiltGroup,
    RawEntry,
    decode_entry,
    encode_batch,
    encode_built,
    encode_raw_batch,
    mark_positions,
    unbuilt,
)
from mqcluster.protocol.dledger import (
    OLDEST_ENTRY_VERSION,
    DLedgerRequestCode,
    encode_addresses,
)
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
from mqcluster.store.codec import RecordKind
from mqcluster.store.errors import StoreLayoutError
from mqcluster.store.message import MessageRecord, PutResult, PutStatus
from mqcluster.wire.frame import RemotingCommand, ResponseCode
from mqcluster.wire.rpc import Connection, HandlerRegistry, RpcError

log = logging.getLogger(__name__)

__all__ = ["PROPERTY_DLEDGER_INDEX", "DLedgerReplication", "DLedgerStateMachine",
           "last_applied"]

Position = tuple[int, int]
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


def _position(props: dict[str, str]) -> Position | None:
    raw = props.get(PROPERTY_DLEDGER_INDEX)
    if not raw:
        return None
    index, _, pos = raw.partition(".")
    return int(index), int(pos)


def last_applied(commitlog_dir: Path, segment_size: int) -> Position | None:
    """The entry index and position of the newest message in the commitlog, reading only
    its last two segments (every message carries them)."""
    if not commitlog_dir.is_dir():
        return None
    names = sorted(n for n in os.listdir(commitlog_dir) if n.isdigit())
    last: Position | None = None
    for name in names[-2:]:
        data = (commitlog_dir / name).read_bytes()
        pos = 0
        while pos < len(data):
            rec = codec.check(data, pos, int(name) + pos, False, segment_size)
            if rec.kind is not RecordKind.MESSAGE:
                break
            found = _position(codec.decode(data, pos).properties)
            last = found or last
            pos += rec.size
    return last


class DLedgerStateMachine:
    def __init__(self, store: MessageStore, resume_after: Position | None,
                 on_rebuilt: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.resume_after = resume_after
        self.on_rebuilt = on_rebuilt
        self.leading = False
        """A leader's producers wait for their messages' consume-queue entries; a
        follower's appends are dispatched in bulk."""
        self.rebuilt = 0
        """Entries with records built ahead that had to be encoded again here."""
        # A leader's own proposals as it built them, by the identity of their data
        # (the entry carries the very same bytes object): applied without decoding.
        self._proposed: dict[int, tuple[bytes, RawEntry | BuiltGroup]] = {}

    def expect(self, data: bytes, decoded: RawEntry | BuiltGroup) -> None:
        self._proposed[id(data)] = (data, decoded)

    def forget(self, data: bytes) -> None:
        self._proposed.pop(id(data), None)

    def _first_unapplied(self, index: int) -> int | None:
        """Position of the entry's first message not yet in the store (None: none is)."""
        start = 0
        if self.resume_after is not None:
            done_index, pos = self.resume_after
            if index < done_index:
                return None
            if index == done_index:
                start = pos + 1
            self.resume_after = None
        return start

    def apply(self, entry: Entry) -> list[PutResult] | BatchPutResult | list[BatchPutResult] \
            | None:
        start = self._first_unapplied(entry.index)
        if start is None:  # stored before a restart: not even decoded
            return None
        own = self._proposed.pop(id(entry.data), None)
        decoded = own[1] if own is not None and own[0] is entry.data else decode_entry(entry.data)
        if isinstance(decoded, BuiltGroup):
            if start == 0:
                stored = self._apply_built_group(entry.index, decoded.sections)
                if stored is not None:
                    return stored
            # one result per section; a section wholly stored before a restart is done
            return [self._apply_built(entry.index, sec, start - sec.first_position)
                    if start < sec.first_position + len(sec.built.sizes)
                    else BatchPutResult(PutStatus.PUT_OK) for sec in decoded.sections]
        if isinstance(decoded, RawEntry):
            return self._apply_batch(entry.index, decoded, start)
        batch = decoded
        records = batch.records[start:]
        for i, rec in enumerate(records, start):
            rec.properties[PROPERTY_DLEDGER_INDEX] = f"{entry.index}.{i}"
        results, _ = self.store.append_records(records, batch.store_timestamp,
                                               batch.store_host)
        return results

    def _apply_batch(self, index: int, entry: RawEntry, start: int,
                     first_position: int = 0) -> BatchPutResult:
        """The batch's messages from ``start`` on, as positions ``first_position + i``
        of entry ``index``."""
        b = entry.batch
        if start >= len(b.bodies):
            return BatchPutResult(PutStatus.PUT_OK)
        props = mark_positions(b.properties[start:], index, first_position + start)
        tail = RawBatch(b.topic, b.queue_id, b.born_host, b.born_timestamp, b.bodies[start:],
                        props, b.tags_codes[start:], b.flags[start:], b.sys_flag,
                        b.reconsume_times)
        result = self.store.append_raw_batch(tail, entry.store_timestamp, entry.store_host)
        if result.status is not PutStatus.PUT_OK:
            log.error("entry %d cannot be stored: %s", index, result.remark)
        return result

    def _apply_built_group(self, index: int,
                           sections: list[BuiltEntry]) -> list[BatchPutResult] | None:
        """Every section of an entry as the leader built them, with one write, when
        this commitlog is where it placed them all; None (nothing written) otherwise,
        and the sections are taken one by one."""
        if any(sec.index != index for sec in sections):
            return None
        results = self.store.append_built_group([sec.built for sec in sections], self.leading)
        if results is not None and results[0].status is not PutStatus.PUT_OK:
            log.error("entry %d cannot be stored: %s", index, results[0].remark)
        return results

    def _apply_built(self, index: int, entry: BuiltEntry, start: int) -> BatchPutResult:
        """A section's records as the leader built them when this commitlog is where it
        placed them (always, unless its projection was wrong); otherwise encoded again
        here, as every replica does in the same state. ``start``: its first message
        not yet stored."""
        start = max(0, start)
        if start >= len(entry.built.sizes):
            return BatchPutResult(PutStatus.PUT_OK)
        if start == 0 and entry.index == index:
            result = self.store.append_built_batch(entry.built, self.leading)
            if result is not None:
                if result.status is not PutStatus.PUT_OK:
                    log.error("entry %d cannot be stored: %s", index, result.remark)
                return result
        self.rebuilt += 1
        self.on_rebuilt()
        raw = RawEntry(entry.built.store_timestamp, entry.store_host, unbuilt(entry))
        return self._apply_batch(index, raw, start, entry.first_position)

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
        resume = last_applied(cfg.commitlog_dir, cfg.mappedFileSizeCommitLog)
        self.builder = EntryBuilder()
        self.state_machine = DLedgerStateMachine(store, resume, self._rebuilt)
        raft_dir = Path(cfg.storePathDLedgerCommitLog
                        or Path(cfg.storePathRootDir) / "dledger")
        self.runner = RaftRunner(
            self.self_id, peers, raft_dir, self.state_machine,
            RaftConfig(preferred_leader_ids=preferred_leaders(cfg),
                       max_transfer_gap=cfg.dLegerPreferredLeaderGap,
                       heartbeat_interval=cfg.heartBeatTimeIntervalMs / 1000,
                       max_heartbeat_leak=cfg.maxHeartBeatLeak),
            # Persist in the I/O thread: the replicas of a group often share a disk, and
            # an fsync on the loop's thread would hold up applying and serving meanwhile.
            # A replica starved of CPU (replicas and clients often share a few cores)
            # must not take its own pause for the leader's silence.
            # The log is never compacted (the store is its state): only its newest
            # entries stay in memory.
            options=RunnerOptions(snapshot_every=0, inline_persist_below=0.0,
                                  max_clock_gap=0.05,
                                  max_cached_log_bytes=DLEDGER_CACHED_LOG_BYTES))
        self.runner.registry.register(DLedgerRequestCode.BROKER_ADDRESSES, self._addresses)
        self.runner.on_role_change.append(self._role_changed)
        registry.register(DLedgerRequestCode.DLEDGER_STATUS, self._status)
        registry.register(DLedgerRequestCode.DLEDGER_TRANSFER_LEADERSHIP, self._transfer)
        self.peers_api = DLedgerClient(connect_timeout=1.0)
        self._following: asyncio.Task[None] | None = None
        self._asking_versions: asyncio.Task[None] | None = None
        self.peers_read_built = False
        """Every other replica reads version 3 entries (records built by the leader)."""
        self.proposed_built = self.proposed_other = 0
        # Sections with built records gathered for the next entry, each with its
        # producer's waiter; and how many such entries are proposed, not yet applied.
        self._group: list[tuple[BuiltEntry, asyncio.Future[BatchPutResult]]] = []
        self._groups_in_flight = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._may_wait_for_apply = False
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
        for task in (self._following, self._asking_versions):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.runner.stop()
        await self.peers_api.close()

    # ---- writes -------------------------------------------------------------------

    async def put_messages(self, recs: Sequence[MessageRecord]) -> list[PutResult]:
        data = encode_batch(list(recs), wall_ms(), self.ctx.addresses.broker)
        self._flush_group()  # (it holds the entry index before this one)
        self.builder.reset()  # their size is known only once applied
        self._may_wait_for_apply = False  # (single sends come often: no pause for them)
        self.proposed_other += 1
        try:
            results: list[PutResult] = await self.runner.propose(data)
        except RaftNotLeaderError as exc:
            return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE,
                              remark=f"not the DLedger leader (leader: {exc.leader_id})")
                    for _ in recs]
        except ProposalError as exc:
            return [PutResult(PutStatus.FLUSH_SLAVE_TIMEOUT, remark=str(exc)) for _ in recs]
        return results

    async def put_batch(self, batch: RawBatch) -> BatchPutResult:
        """One queue's batch: its records encoded once, by the leader, when it can tell
        where every replica will store them, and sent with the other batches gathered
        meanwhile as one entry (``GROUPS_IN_FLIGHT``); otherwise one entry in the
        producer's layout (no per-message decoding on the leader or the followers)."""
        return (await self.put_batches([batch]))[0]

    async def put_batches(self, batches: Sequence[RawBatch]) -> list[BatchPutResult]:
        """``put_batch`` of each, entered in order on this turn: a pipelining producer's
        burst joins the entry being gathered without a task per batch."""
        runner = self.runner
        if (self._may_wait_for_apply and self.peers_read_built and not self.builder.ready
                and not runner.applied_everything):
            # Once per term: hold these batches until the log is applied, so that the
            # leader can tell where every later batch's records go.
            self._may_wait_for_apply = False
            with contextlib.suppress(TimeoutError, ProposalError):
                await asyncio.wait_for(runner.wait_applied(runner.next_index() - 1), 1.0)
        started = [self._enter(batch) for batch in batches]
        return [r if isinstance(r, BatchPutResult) else await r for r in started]

    def _enter(self, batch: RawBatch) -> BatchPutResult | Awaitable[BatchPutResult]:
        """Put ``batch`` in the log's queue now; its result, or what gives it."""
        group = self._group
        if group and group[-1][0].built.end - group[0][0].built.start >= GROUP_BYTES:
            self._flush_group()
        now_ms, host = wall_ms(), self.ctx.addresses.broker
        built = self._build(batch, now_ms, host)
        if isinstance(built, BatchPutResult):
            return built
        if built is not None:
            self.proposed_built += 1
            return self._join_group(built)
        self._flush_group()  # (it holds the entry index before this one)
        self.builder.reset()
        self.proposed_other += 1
        store_cfg = self.ctx.store.config
        _, problem = check_batch(batch, host, store_cfg.maxMessageSize,
                                 store_cfg.maxPropertiesSize, store_cfg.mappedFileSizeCommitLog)
        if problem is not None:  # refused before it enters the log
            return BatchPutResult(problem[0], remark=problem[1])
        data = encode_raw_batch(batch, now_ms, host)
        sm = self.state_machine
        sm.expect(data, RawEntry(now_ms, host, batch))
        try:
            proposed = self.runner.submit([data])
        except (RaftNotLeaderError, ProposalError) as exc:
            sm.forget(data)
            self.builder.reset()
            return _refusal(exc)
        # A task: it forgets the entry even if the burst's waiter is cancelled first.
        return asyncio.ensure_future(self._raw_result(proposed, data))

    async def _raw_result(self, proposed: asyncio.Future[list[Any]],
                          data: bytes) -> BatchPutResult:
        try:
            (result,) = await proposed
        except (RaftNotLeaderError, ProposalError) as exc:
            self.builder.reset()
            return _refusal(exc)
        finally:
            self.state_machine.forget(data)
        assert isinstance(result, BatchPutResult)
        return result

    def _build(self, batch: RawBatch, now_ms: int,
               host: str) -> BuiltEntry | BatchPutResult | None:
        """The batch as a section of the version 3 entry being gathered, its records
        encoded where every replica will store them; None when this leader cannot tell
        where that is (then the batch goes as version 2 and each replica encodes it)."""
        builder, runner, store = self.builder, self.runner, self.ctx.store
        if not self.peers_read_built:
            return None
        if not builder.ready:
            if self._group or not runner.applied_everything:
                return None
            builder.start_from(store.commitlog_max_offset)
        if self._group:  # the next positions of the entry being gathered
            last = self._group[-1][0]
            index, first_position = last.index, last.first_position + len(last.built.sizes)
        else:
            index, first_position = runner.next_index(), 0
        marked = batch.with_properties(mark_positions(batch.properties, index, first_position))
        cfg = store.config
        enc, problem = check_batch(marked, host, cfg.maxMessageSize, cfg.maxPropertiesSize,
                                   cfg.mappedFileSizeCommitLog)
        if enc is None:
            assert problem is not None
            return BatchPutResult(problem[0], remark=problem[1])
        return builder.place(enc, index, now_ms, host, store.next_queue_offset,
                             cfg.mappedFileSizeCommitLog, first_position)

    def _join_group(self, built: BuiltEntry) -> asyncio.Future[BatchPutResult]:
        """Add a section to the entry being gathered, proposed at the end of this loop
        turn, or once the entries in flight are done (``GROUPS_IN_FLIGHT``)."""
        loop = self._loop
        if loop is None:  # (looked up once: on Python 3.11 each lookup is a getpid call)
            loop = self._loop = asyncio.get_running_loop()
        if not self._group and self._groups_in_flight < GROUPS_IN_FLIGHT:
            loop.call_soon(self._flush_group)
        waiter: asyncio.Future[BatchPutResult] = loop.create_future()
        self._group.append((built, waiter))
        return waiter

    def _flush_group(self) -> None:
        """Propose the gathered sections as one entry (before anything proposed after
        them: their marks name the index it gets)."""
        if not self._group:
            return
        sections = [section for section, _ in self._group]
        waiters = [waiter for _, waiter in self._group]
        self._group = []
        group = BuiltGroup(sections[0].index, self.ctx.addresses.broker, sections)
        data = encode_built(group)
        sm = self.state_machine
        sm.expect(data, group)
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
        self.builder.reset()
        refusal = _refusal(exc)
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(refusal)

    # ---- roles ----------------------------------------------------------------------

    def _rebuilt(self) -> None:
        self.builder.reset()
        self._may_wait_for_apply = True

    def _role_changed(self, status: RaftStatus) -> None:
        for task in (self._following, self._asking_versions):
            if task is not None:
                task.cancel()
        self._following = self._asking_versions = None
        self.builder.reset()
        self.peers_read_built = False
        self._may_wait_for_apply = True
        self.state_machine.leading = status.role is Role.LEADER
        if status.role is Role.LEADER:
            addrs = self.ctx.addresses
            self.ctx.set_role(ReplicaRole(MASTER_ID, True, addrs.broker, addrs.grpc,
                                          status.term))
            log.info("DLedger leader of term %d: serving writes", status.term)
            self._asking_versions = asyncio.get_running_loop().create_task(
                self._ask_entry_versions())
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

    async def _ask_entry_versions(self) -> None:
        """Ask every other replica (on its Raft address) which entry layouts it reads
        until all read version 3: a replica of an older release, during a rolling
        upgrade, must still get entries it can apply."""
        pending = {p: a for p, a in self.runner.peers.items() if p != self.self_id}
        while pending:
            for peer, addr in list(pending.items()):
                try:
                    answer = await self.peers_api.addresses(addr, 1.0)
                except (RpcError, OSError, ValueError):
                    continue
                if answer.get("entryVersion", OLDEST_ENTRY_VERSION) >= BUILT_VERSION:
                    del pending[peer]
            if pending:
                await asyncio.sleep(0.2)
        self.peers_read_built = True
        log.info("every replica reads entries with records built by the leader")

    async def _addresses(self, cmd: RemotingCommand, _c: Connection) -> RemotingCommand:
        addrs = self.ctx.addresses
        return cmd.response(body=encode_addresses(addrs.broker, addrs.grpc, ENTRY_VERSION))

    async def _status(self, cmd: RemotingCommand, _c: Connection) -> RemotingCommand:
        answer = self.runner.status().to_json()
        # how often this replica's batches went with their records built (as leader),
        # and how often it had to encode built records again (any replica)
        answer.update(proposedBuilt=self.proposed_built, proposedOther=self.proposed_other,
                      rebuilt=self.state_machine.rebuilt)
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
