"""asyncio runner of one Raft group member: core + disk log + transport + state machine.

One driver task owns the order of effects: for each ``Ready`` of the core it
persists (hard state, snapshot, truncation, entries: one fsync per batch),
then sends the messages, then applies the committed entries, then calls
``advance``. On a fast disk the write+fsync runs on the loop's own thread (a
hand-off to a thread and back costs more than the fsync); when the disk is
slow (``RunnerOptions.inline_persist_below``) and for snapshots it runs in an
I/O thread so the loop keeps serving. Raft messages are decoded and stepped
into the core in the connection's reader (no task per message); outgoing ones
are written to the peer's transport at once. The tick timer steps the core
directly too (the core allows it while a Ready is out); both wake the driver.
Proposals are queued and handed to the core as one batch per driver round, so
concurrent callers share appends and fsyncs.

Departures from the plain Ready order, all safe (Raft thesis 10.2.1): a leader
sends its AppendRequests before its own fsync; it writes its new entries and
fsyncs them a few milliseconds later in the I/O thread, one fsync for all it
wrote meanwhile (``RunnerOptions.leader_sync_behind``), so its followers' acks
commit without waiting for its disk; it counts itself towards a commit only once
that fsync is done (``RaftNode.entries_persisted``). Committed entries are applied
as soon as the core reports them committed, not after the next fsync (they are
durable on a majority; the state machine is rebuilt from disk after a crash).

Embedding (e.g. the controller), sharing the process's registry and server::

    registry = HandlerRegistry()
    runner = RaftRunner("c0", peers, store_dir, state_machine, RaftConfig(), registry=registry)
    server = RpcServer(host, port, registry)        # listening on peers["c0"]
    await server.start(); await runner.start()
    runner.on_role_change.append(lambda status: ...)  # RaftStatus on every role/term change
    result = await runner.propose(data)  # RaftNotLeaderError(leader_id, leader_addr) elsewhere
    runner.status()                      # role, term, leader_id, leader_addr, commit_index, ...
    await runner.stop(); await server.stop()

Without ``registry`` the runner serves ``peers[node_id]`` itself (``runner.registry``
is then its own, and more handlers may be registered on it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mqcluster.raft.codec import (
    RAFT_MESSAGE_CODES,
    EntriesBodyCache,
    decode_message,
    encode_message,
)
from mqcluster.raft.core import RaftNode
from mqcluster.raft.disk_log import DiskLog
from mqcluster.raft.peers import PeerClient, PeerGate, hosts_checked, remote_ip
from mqcluster.raft.types import (
    AppendRequest,
    Entry,
    EntryType,
    HeartbeatRequest,
    Membership,
    Message,
    NotLeaderError,
    RaftConfig,
    Ready,
    Role,
    Snapshot,
    SnapshotMeta,
)
from mqcluster.wire.frame import FrameError, RemotingCommand, encode_frame_parts
from mqcluster.wire.ratelog import RateLimitedLog
from mqcluster.wire.rpc import (
    Connection,
    HandlerRegistry,
    RpcError,
    RpcServer,
    split_addr,
)

log = logging.getLogger(__name__)

_LEADER_PUSH = (AppendRequest, HeartbeatRequest)
_MAX_UNSENT_BYTES = 64 * 1024 * 1024  # per peer, in the transport's buffer
_JOIN_BELOW = 16 * 1024  # frame bodies at least this big are written on their own
_PEER_ATTRIBUTE = "raft.peer"  # on a server connection: the member sending over it
_PORT_PROBES = 5  # of a leader whose connection closed (see _peer_connection_closed)
_REFUSED = object()  # _PEER_ATTRIBUTE of a connection closed for what it sent
_REFUSAL_LOG_INTERVAL = 60.0  # seconds between two warnings about one remote host


async def port_refuses(addr: str, timeout: float) -> bool:
    """Whether connecting to ``addr`` is refused (nothing listens there)."""
    host, port = split_addr(addr)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return False


class StateMachine(Protocol):
    """What the group replicates. Only NORMAL entries are applied; the result goes
    back to the proposer. ``snapshot``/``restore`` must round-trip the whole state."""

    def apply(self, entry: Entry) -> Any: ...

    def snapshot(self) -> bytes: ...

    def restore(self, data: bytes) -> None: ...


class RaftNotLeaderError(NotLeaderError):
    """Not the leader; ``leader_id``/``leader_addr`` say where to go (None if unknown)."""

    def __init__(self, leader_id: str | None, leader_addr: str | None) -> None:
        super().__init__(leader_id)
        self.leader_addr = leader_addr


class ProposalError(Exception):
    """A proposal was accepted but will never be applied as proposed (lost leadership,
    overwritten by another leader's entries, timed out, or the runner stopped)."""


@dataclass(frozen=True)
class RaftStatus:
    node_id: str
    role: Role
    term: int
    leader_id: str | None
    leader_addr: str | None
    commit_index: int
    applied_index: int
    last_index: int
    snapshot_index: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.node_id,
            "role": self.role.value,
            "term": self.term,
            "leader": self.leader_id,
            "leaderAddr": self.leader_addr,
            "commitIndex": self.commit_index,
            "appliedIndex": self.applied_index,
            "lastIndex": self.last_index,
            "snapshotIndex": self.snapshot_index,
        }


@dataclass
class RunnerOptions:
    tick_interval: float = 0.01
    snapshot_every: int = 50_000  # applied entries between snapshots; 0 = never
    propose_timeout: float = 10.0
    segment_bytes: int = 64 * 1024 * 1024
    reconnect_backoff: float = 0.05
    # Persist on the loop's own thread while write+fsync takes less than this on
    # average (a fast disk: handing off to the I/O thread and back costs more than
    # the fsync, in GIL hand-overs and wake-ups); slower disks use the I/O thread
    # so the loop keeps taking proposals and acks meanwhile (a leader also pushes
    # new entries at once then, see ``RaftNode.take_leader_pushes``).
    # 0 = always the I/O thread.
    inline_persist_below: float = 0.002
    # A leader writes its entries and sends them, and fsyncs them after a while (one
    # fsync for everything written meanwhile): its followers' acks commit without
    # waiting for the leader's disk (see ``RaftRunner._sync_later``).
    leader_sync_behind: bool = True
    leader_sync_delay: float = 0.005
    # The core's timers count at most this much of any gap in which the member's
    # loop did not run (its ticks come every ``tick_interval`` otherwise): a member
    # that was descheduled or blocked could not hear its leader meanwhile, so that
    # time is not the leader's silence. A leader that was stopped finds out from the
    # others' bigger term. 0 = real time throughout.
    max_clock_gap: float = 0.0
    # Keep at most this much entry data in memory once applied and durable (None:
    # all of it); older entries are read back from the log files when a follower
    # far behind needs them. For state machines without snapshots.
    max_cached_log_bytes: int | None = None
    # Take Raft messages only over connections from the sender's configured host (see
    # ``mqcluster.raft.peers``; MQCLUSTER_RAFT_PEER_HOSTS=any turns it off); the sender
    # must be a configured peer either way.
    check_peer_hosts: bool = field(default_factory=hosts_checked)
    # Write entries, truncations and hard state on the loop's own thread and only fsync
    # in the I/O thread: for a log whose writes change state the loop owns (a DLedger
    # log that writes messages into the broker's commitlog).
    write_on_loop: bool = False


def parse_peers(spec: str) -> dict[str, str]:
    """DLedger peer syntax ``n0-host:port;n1-host:port`` -> ``{"n0": "host:port", ...}``."""
    peers: dict[str, str] = {}
    for part in spec.replace(",", ";").split(";"):
        part = part.strip()
        if not part:
            continue
        node_id, sep, addr = part.partition("-")
        if not sep or not node_id:
            raise ValueError(f"peer {part!r} is not id-host:port")
        split_addr(addr)
        if node_id in peers:
            raise ValueError(f"peer id {node_id!r} listed twice")
        peers[node_id] = addr
    if not peers:
        raise ValueError("no peers given")
    return peers


@dataclass
class RunnerStats:
    """Counters since start: how well writes are batched and what the disk costs."""

    readies: int = 0
    persists: int = 0  # fsync'd batches (hard state and snapshots included)
    persisted_entries: int = 0
    persist_seconds: float = 0.0
    inline_persists: int = 0  # of ``persists``, done on the event loop's own thread
    proposals: int = 0  # propose_batch calls handed to the core
    proposed_entries: int = 0
    refused_connections: int = 0  # closed for a malformed message or one from a non-peer


@dataclass(slots=True)
class _Proposal:
    datas: list[bytes]
    future: asyncio.Future[list[Any]]
    first: int = 0
    last: int = 0
    term: int = 0
    results: list[Any] = field(default_factory=list)


def _frames(msgs: list[Message], cache: EntriesBodyCache) -> list[bytes]:
    """The frames of ``msgs`` as few buffers: small parts joined, a large body (the
    records of a push, the same object for every follower) left as it is, so the
    transport can send it without a copy."""
    out: list[bytes] = []
    parts: list[bytes] = []
    for m in msgs:
        head, body = encode_frame_parts(encode_message(m, cache))
        parts.append(head)
        if len(body) < _JOIN_BELOW:
            parts.append(body)
            continue
        out.append(b"".join(parts))
        out.append(body)
        parts = []
    if parts:
        out.append(b"".join(parts))
    return out


class _PeerSender:
    """Ordered one-way delivery to one peer; drops what it cannot deliver (Raft retries).

    While the connection is up, messages are written to its transport at once (in
    the caller's turn of the loop, before e.g. the leader's own fsync); the task
    only connects, and writes what was queued meanwhile."""

    def __init__(
        self, client: PeerClient, peer: str, addr: str, backoff: float, cache: EntriesBodyCache
    ) -> None:
        self.client, self.peer, self.addr, self.backoff = client, peer, addr, backoff
        self.cache = cache
        self.pending: list[Message] = []
        self.conn: Connection | None = None
        self.wake = asyncio.Event()
        self.reachable = True
        self.closed = False
        self.task = asyncio.create_task(self._run(), name=f"raft-send-{peer}")

    def push(self, msgs: list[Message]) -> None:
        conn = self.conn
        if conn is not None and not self.pending and not conn.closed:
            if conn.writer.transport.get_write_buffer_size() > _MAX_UNSENT_BYTES:
                return  # a stalled peer: drop, as on a lost connection (Raft re-sends)
            write = conn.writer.write
            for data in _frames(msgs, self.cache):
                write(data)
            return
        self.conn = None
        self.pending.extend(msgs)
        self.wake.set()

    async def _run(self) -> None:
        # ``closed`` is checked as well as cancellation: on Python 3.11 a cancel can be
        # lost inside ``asyncio.wait_for`` (used when connecting).
        while not self.closed:
            await self.wake.wait()
            self.wake.clear()
            if not self.pending or self.closed:
                continue
            try:
                conn = await self.client.connection(self.addr)
            except RpcError as exc:
                self._unreachable(f"{exc}")
                await asyncio.sleep(self.backoff)
                continue
            batch, self.pending = self.pending, []
            cache = self.cache
            data = b"".join(_frames(batch, cache))
            try:
                conn.writer.write(data)
                await conn.writer.drain()
            except (ConnectionError, OSError) as exc:
                # The connection's reader sees the failure too and marks it closed.
                self._unreachable(f"send failed: {exc}")
                continue
            if not self.pending and not conn.closed:
                self.conn = conn
            if not self.reachable:
                log.info("peer %s at %s reachable again", self.peer, self.addr)
                self.reachable = True

    def _unreachable(self, reason: str) -> None:
        self.conn = None
        self.pending.clear()
        if self.reachable:
            log.info("peer %s at %s unreachable: %s", self.peer, self.addr, reason)
            self.reachable = False

    async def close(self) -> None:
        self.closed = True
        self.conn = None
        self.wake.set()
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


class RaftRunner:
    def __init__(
        self,
        node_id: str,
        peers: dict[str, str],
        store_dir: str | Path,
        state_machine: StateMachine,
        config: RaftConfig | None = None,
        *,
        registry: HandlerRegistry | None = None,
        options: RunnerOptions | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        log_factory: Callable[[], DiskLog] | None = None,
    ) -> None:
        """``log_factory``: opens the log on the loop's thread at ``start`` (default: a
        ``DiskLog`` in ``store_dir``, opened in a thread)."""
        if node_id not in peers:
            raise ValueError(f"node id {node_id!r} is not among the peers {sorted(peers)}")
        self.node_id = node_id
        self.peers = dict(peers)
        self.store_dir = Path(store_dir)
        self.state_machine = state_machine
        self.config = config or RaftConfig()
        self.options = options or RunnerOptions()
        self._own_server = registry is None
        self.registry = registry or HandlerRegistry()
        self._rng = rng or random.Random()
        self._clock = clock
        self.on_role_change: list[Callable[[RaftStatus], None]] = []

        self._log: DiskLog | None = None
        self._log_factory = log_factory
        # One thread for all disk writes: DiskLog has a single writer.
        self._io = ThreadPoolExecutor(1, thread_name_prefix=f"raft-io-{node_id}")
        self._node: RaftNode | None = None
        self._server: RpcServer | None = None
        self._client: PeerClient | None = None
        self._gate = PeerGate(self.peers, check_hosts=self.options.check_peer_hosts, clock=clock)
        self._refusals_log = RateLimitedLog(log, interval=_REFUSAL_LOG_INTERVAL)
        self._senders: dict[str, _PeerSender] = {}
        self._bodies = EntriesBodyCache()
        self._tasks: list[asyncio.Task[None]] = []
        self._watchers: set[asyncio.Task[None]] = set()  # see _watch_peer_connection
        self._wake = asyncio.Event()
        self._stopping = False
        self._stopped = asyncio.Event()
        self.failure: BaseException | None = None
        self._proposals: list[_Proposal] = []
        self._waiting: deque[_Proposal] = deque()
        self._applied = 0
        self._applied_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._handed_commit = 0  # highest commit index the core has handed out in a Ready
        self._pending_compact: tuple[int, bytes] | None = None
        self._seen: tuple[Role, int, str | None] | None = None
        self._unknown_peers_logged: set[str] = set()
        self._persist_ewma = 0.0  # seconds per persist (write + fsync), recent average
        # True while a leader's Ready without hard state is persisted in the I/O
        # thread: new pushes go out at once instead of after that fsync.
        self._push_early = False
        self._sync_wanted = 0  # highest leader entry written and waiting for an fsync
        self._sync_term = 0
        self._sync_timer: asyncio.TimerHandle | None = None  # the leader's deferred fsync
        self._sync_due = False  # its time has come: the driver does it next
        self._syncing: asyncio.Future[None] | None = None  # that fsync, in the I/O thread
        self.stats = RunnerStats()
        self._stop_task: asyncio.Task[None] | None = None
        self._last_real = clock()
        self._stalled = 0.0  # real seconds left out of the core's clock (max_clock_gap)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._log_factory is not None:
            self._log = self._log_factory()
        else:
            self._log = await asyncio.to_thread(
                DiskLog, self.store_dir, segment_bytes=self.options.segment_bytes
            )
        # Without snapshots the log is never compacted: its entries' data is read
        # when needed rather than all at once.
        state = self._log.load(with_data=self.options.max_cached_log_bytes is None)
        if state.snapshot is not None:
            self.state_machine.restore(state.snapshot.data)
            self._applied = self._handed_commit = state.snapshot.meta.index
        self._node = RaftNode(
            self.node_id,
            self.config,
            Membership(voters=sorted(self.peers)),
            hard_state=state.hard_state,
            snapshot=state.snapshot,
            entries=state.entries,
            stored=state.stored,
            rng=self._rng,
            now=self.core_time(),
            load=self._stored_entries,
            max_cached_bytes=self.options.max_cached_log_bytes,
        )
        log.info(
            "%s: starting, term %d, log %d..%d, snapshot at %d",
            self.node_id, state.hard_state.term, self._log.first_index, self._log.last_index,
            self._log.snapshot_index,
        )
        for code in RAFT_MESSAGE_CODES:
            self.registry.register_sync(code, self._on_message)
        await self._gate.resolve()
        self._client = PeerClient(split_addr(self.peers[self.node_id])[0], connect_timeout=0.5)
        if self._own_server:
            host, port = split_addr(self.peers[self.node_id])
            self._server = RpcServer(host, port, self.registry)
            await self._server.start()
        self._tasks = [
            asyncio.create_task(self._drive(), name=f"raft-drive-{self.node_id}"),
            asyncio.create_task(self._tick_loop(), name=f"raft-tick-{self.node_id}"),
        ]

    def _stored_entries(self, lo: int, hi: int) -> list[Entry]:
        """Entries lo..hi from the log files (applied ones: never truncated, so the
        I/O thread's appends meanwhile do not touch them)."""
        assert self._log is not None
        return self._log.entries(lo, hi + 1)

    async def stop(self) -> None:
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        self._wake.set()
        ticker = self._tasks[1] if len(self._tasks) > 1 else None
        if ticker is not None:
            ticker.cancel()
        # The driver finishes the Ready it is persisting, then exits on its own.
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._fail_all(ProposalError("raft runner stopped"))
        for watcher in list(self._watchers):
            watcher.cancel()
        for sender in self._senders.values():
            await sender.close()
        if self._server is not None:
            await self._server.stop()
        if self._client is not None:
            await self._client.close()
        await self._gate.close()
        if self._sync_timer is not None:
            self._sync_timer.cancel()
        if self._syncing is not None:
            with contextlib.suppress(Exception):
                await self._syncing
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.sync()  # what a leader wrote since its last fsync
            self._log.close()
        self._io.shutdown(wait=False)
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    # ------------------------------------------------------------------ public API

    @property
    def node(self) -> RaftNode:
        if self._node is None:
            raise RuntimeError("runner not started")
        return self._node

    def status(self) -> RaftStatus:
        node = self.node
        leader = node.leader_id
        return RaftStatus(
            node_id=self.node_id,
            role=node.role,
            term=node.term,
            leader_id=leader,
            leader_addr=self.peers.get(leader) if leader else None,
            commit_index=node.commit_index,
            applied_index=self._applied,
            last_index=node.last_index,
            snapshot_index=node.snapshot_index,
        )

    @property
    def is_leader(self) -> bool:
        return self._node is not None and self._node.role == Role.LEADER

    def not_leader_error(self) -> RaftNotLeaderError:
        leader = self._node.leader_id if self._node is not None else None
        if leader == self.node_id:  # a leader refusing writes while transferring
            leader = self._node.transferee if self._node is not None else None
        return RaftNotLeaderError(leader, self.peers.get(leader) if leader else None)

    def next_index(self) -> int:
        """The index the next value proposed now will get, unless the core appends an
        entry of its own first (a leader's no-op, a membership change)."""
        return self.node.last_index + 1 + sum(len(p.datas) for p in self._proposals)

    @property
    def applied_everything(self) -> bool:
        """Every entry of the log applied here, and no proposal waiting to enter it."""
        node = self._node
        return node is not None and not self._proposals and self._applied == node.last_index

    async def wait_applied(self, index: int) -> None:
        """Until the entries up to ``index`` are applied here."""
        if self._applied >= index:
            return
        if self._stopping or self.failure is not None:
            raise ProposalError("raft runner stopped")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._applied_waiters.append((index, fut))
        await fut

    def _release_applied(self) -> None:
        keep = []
        for index, fut in self._applied_waiters:
            if fut.done():
                continue
            if index <= self._applied:
                fut.set_result(None)
            else:
                keep.append((index, fut))
        self._applied_waiters = keep

    async def propose(self, data: bytes, timeout: float | None = None) -> Any:
        """Replicate ``data``; returns the state machine's result once applied here."""
        return (await self.propose_batch([data], timeout))[0]

    async def propose_batch(
        self, datas: Sequence[bytes], timeout: float | None = None
    ) -> list[Any]:
        """Replicate several values as consecutive entries; one result per value."""
        if self._stopping or self.failure is not None:
            raise ProposalError("raft runner stopped")
        if not self.is_leader or self.node.transferee is not None:
            raise self.not_leader_error()
        if not datas:
            return []
        return await self.submit(datas, timeout)

    def submit(
        self, datas: Sequence[bytes], timeout: float | None = None
    ) -> asyncio.Future[list[Any]]:
        """``propose_batch`` without waiting: the values are queued before this returns
        (so they come after anything proposed earlier), and the future gets their results
        (or ``ProposalError`` / ``RaftNotLeaderError``)."""
        if self._stopping or self.failure is not None:
            raise ProposalError("raft runner stopped")
        if not self.is_leader or self.node.transferee is not None:
            raise self.not_leader_error()
        loop = asyncio.get_running_loop()
        proposal = _Proposal(list(datas), loop.create_future())
        self._proposals.append(proposal)
        if self._push_early:
            self._take_proposals()
            self._send(self.node.take_leader_pushes())
        self._wake.set()
        # A timer instead of asyncio.wait_for: the result reaches the caller one
        # turn of the loop sooner, with fewer callbacks per proposal.
        expiry = loop.call_later(
            timeout if timeout is not None else self.options.propose_timeout,
            self._expire,
            proposal,
        )
        proposal.future.add_done_callback(lambda _f: expiry.cancel())
        return proposal.future

    @staticmethod
    def _expire(p: _Proposal) -> None:
        if not p.future.done():
            p.future.set_exception(
                ProposalError(f"proposal not applied within the timeout (last index {p.last})")
            )

    def transfer_leadership(self, target: str) -> None:
        self.node.transfer_leadership(target, self.core_time())
        self._wake.set()

    def core_time(self) -> float:
        """The core's clock: real time, less what ``max_clock_gap`` leaves out."""
        real = self._clock()
        limit = self.options.max_clock_gap
        if limit > 0:
            gap = real - self._last_real
            if gap > limit:
                self._stalled += gap - limit
            self._last_real = real
        return real - self._stalled

    # ------------------------------------------------------------------ inbound

    def _on_message(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        peer = conn.attributes.get(_PEER_ATTRIBUTE)
        if peer is _REFUSED:
            return None  # the rest of what a refused connection sent before it closed
        try:
            msg = decode_message(cmd, self._bodies)
        except FrameError as exc:
            self._refuse(conn, f"malformed Raft message: {exc}")
            return None
        if peer is None:
            refusal = self._gate.refusal(msg.src, remote_ip(conn))
            if refusal is not None:
                self._refuse(conn, refusal)
                return None
            self._watch_peer_connection(conn, msg.src)
        elif msg.src != peer:
            self._refuse(conn, f"a message from {msg.src!r} on {peer!r}'s connection")
            return None
        if self._node is not None and not self._stopping:
            self._node.step(msg, self.core_time())
            if self._push_early:
                self._send(self._node.take_leader_pushes())
            self._apply_ahead()
            self._wake.set()
        return None

    def _refuse(self, conn: Connection, reason: str) -> None:
        """Close a connection that sent what no peer sends; nothing it sent reaches the
        core. Logged at most once a minute per remote address (a flood stays quiet)."""
        conn.attributes[_PEER_ATTRIBUTE] = _REFUSED
        self.stats.refused_connections += 1
        self._refusals_log.warning(conn.peer.rpartition(":")[0],
                                   "%s: closing Raft connection from %s: %s", self.node_id,
                                   conn.peer, reason)
        conn.writer.close()

    def _watch_peer_connection(self, conn: Connection, peer: str) -> None:
        """When ``peer``'s connection to this member closes, find out whether its
        process is gone (see ``_peer_connection_closed``)."""
        conn.attributes[_PEER_ATTRIBUTE] = peer
        if self._stopping or peer not in self.peers:
            return
        watcher = asyncio.get_running_loop().create_task(
            self._peer_connection_closed(conn, peer), name=f"raft-watch-{peer}")
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)

    async def _peer_connection_closed(self, conn: Connection, peer: str) -> None:
        """A leader whose connection closed and whose port then refuses connections
        has no process behind it (killed, crashed, restarting): its followers campaign
        at once rather than after ``max_heartbeat_leak`` heartbeats of silence. A port
        that answers, or does not answer in time, proves nothing: the timers decide."""
        await conn.wait_closed()
        node = self._node
        if node is None:
            return
        # A dying process's port accepts for a moment: its connections may close
        # before its listening socket does. So a few probes over one heartbeat interval.
        interval = node.config.heartbeat_interval / _PORT_PROBES
        for _ in range(_PORT_PROBES):
            if self._stopping or node.role != Role.FOLLOWER or node.leader_id != peer:
                return
            if await port_refuses(self.peers[peer], node.config.heartbeat_interval):
                break
            await asyncio.sleep(interval)
        else:
            return
        if node.role == Role.FOLLOWER and node.leader_id == peer and not self._stopping:
            log.info("%s: leader %s closed its connection and refuses new ones: "
                     "campaigning now", self.node_id, peer)
            node.leader_unreachable(peer, self.core_time())
            self._wake.set()

    async def _tick_loop(self) -> None:
        interval = self.options.tick_interval
        node = self.node
        while True:
            await asyncio.sleep(interval)
            try:
                node.tick(self.core_time())
            except Exception as exc:
                self._crash("raft tick", exc)
                return
            if self._push_early:
                self._send(node.take_leader_pushes())
            self._apply_ahead()
            self._wake.set()

    # ------------------------------------------------------------------ the driver

    async def _drive(self) -> None:
        node = self.node
        loop = asyncio.get_running_loop()
        try:
            while not self._stopping:
                await self._wake.wait()
                self._wake.clear()
                self._take_proposals()
                self._sync_if_due()
                while not self._stopping and node.has_ready():
                    rd = node.ready()
                    durable = await self._handle(rd, loop)
                    node.advance(rd, entries_durable=durable)
                    if not durable:
                        self._sync_later(rd.entries[-1].index, rd.term, loop)
                    self._take_proposals()
                    await self._maybe_snapshot()
                    self._sync_if_due()
        except Exception as exc:
            # Without durable storage this member must not take part any more.
            self._crash("raft driver", exc)

    def _crash(self, where: str, exc: Exception) -> None:
        log.exception("%s: %s failed; stopping this member", self.node_id, where)
        self.failure = exc
        self._fail_all(ProposalError(f"raft runner failed: {exc!r}"))
        self._stop_task = asyncio.get_running_loop().create_task(self.stop())

    async def _handle(self, rd: Ready, loop: asyncio.AbstractEventLoop) -> bool:
        """Persist, send and apply one Ready (``advance`` is the caller's); False if its
        entries are written but their fsync is left to ``_sync_later``."""
        stats = self.stats
        stats.readies += 1
        durable = True
        if rd.committed:
            self._handed_commit = max(self._handed_commit, rd.committed[-1].index)
        messages, committed = rd.messages, rd.committed
        if rd.snapshot is None and committed and not self.options.write_on_loop:
            # Committed entries are durable on a majority already: applying them
            # does not need this member's copy on disk (after a crash the state
            # machine is rebuilt from the log), so proposers get their results
            # without waiting for this Ready's fsync.
            self._apply(committed)
            committed = []
        if (
            rd.hard_state is not None
            or rd.snapshot is not None
            or rd.truncate_from is not None
            or rd.entries
            or rd.compacted_to is not None
        ):
            # The records are encoded (or were checked on receipt) once, for the disk
            # write and, on a leader, for the pushes of the same entries.
            records = self._bodies.body(rd.entries) if rd.entries else None
            if rd.hard_state is None and rd.role == Role.LEADER:
                # Raft thesis 10.2.1: a leader may replicate its entries while it
                # writes them; it counts itself towards a commit only once
                # ``advance`` reports them durable. Everything else (votes, a
                # follower's acks) waits for the fsync.
                self._send([m for m in messages if isinstance(m, _LEADER_PUSH)])
                messages = [m for m in messages if not isinstance(m, _LEADER_PUSH)]
            t0 = time.perf_counter()
            leading = rd.role == Role.LEADER and rd.hard_state is None and rd.snapshot is None
            stats.persisted_entries += len(rd.entries)
            if (self.options.leader_sync_behind and leading and rd.entries
                    and rd.truncate_from is None and rd.compacted_to is None):
                assert self._log is not None
                self._log.append(rd.entries, records, sync=False)
                durable = False
            elif rd.snapshot is None and self.options.write_on_loop:
                await self._write_then_sync(rd, records, committed, leading, loop)
                committed = []
            elif rd.snapshot is None and self._persist_ewma < self.options.inline_persist_below:
                self._persist(rd, records)
                stats.inline_persists += 1
            else:
                self._push_early = leading
                try:
                    await loop.run_in_executor(self._io, self._persist, rd, records)
                finally:
                    self._push_early = False
            if durable:
                stats.persists += 1
                stats.persist_seconds += time.perf_counter() - t0
        if rd.snapshot is not None:
            self._restore(rd.snapshot)
        self._send(messages)
        self._apply(committed)
        self._observe(rd)
        return durable

    def _sync_later(self, index: int, term: int, loop: asyncio.AbstractEventLoop) -> None:
        """Have the driver fsync a leader's written entries a little later.

        In a group whose followers make a majority without the leader, their acks
        commit the entries; the leader's own fsync then only has to follow, so it
        waits ``leader_sync_delay`` and covers every write made meanwhile with one
        fsync: fewer fsyncs on the shared disk, and fewer stalls of the loop while
        acks arrive. Otherwise (one or two voters) it is due at once.
        """
        self._sync_wanted = max(self._sync_wanted, index)
        self._sync_term = term
        if self._sync_timer is not None or self._stopping:
            return
        membership = self.node.membership
        others = sum(1 for v in membership.voters if v != self.node_id)
        delay = self.options.leader_sync_delay if others > len(membership.voters) // 2 else 0.0
        self._sync_timer = loop.call_later(delay, self._sync_is_due)

    def _sync_is_due(self) -> None:
        self._sync_due = True
        self._wake.set()

    def _sync_if_due(self) -> None:
        """In the driver, which owns every change to the log: start the deferred fsync,
        if due, in the I/O thread (one at a time), so the loop keeps sending, taking
        acks and applying while the disk works; the entries count as this leader's
        own copy once it is done."""
        if not self._sync_due or self._syncing is not None:
            return
        self._sync_due, self._sync_timer = False, None
        assert self._log is not None
        target, term = self._sync_wanted, self._sync_term
        pending = self._log.begin_sync()
        if pending is None:  # a segment change or a later Ready fsync'd them already
            self.node.entries_persisted(target, term)
            self._apply_ahead()
            return
        t0 = time.perf_counter()
        loop = asyncio.get_running_loop()
        done = loop.run_in_executor(self._io, self._log.sync_descriptor, pending)
        self._syncing = done
        done.add_done_callback(lambda f: self._synced(f, target, term, t0))

    def _synced(self, done: asyncio.Future[None], target: int, term: int, t0: float) -> None:
        self._syncing = None
        if self._stopping or done.cancelled():
            return
        exc = done.exception()
        if exc is not None:
            assert isinstance(exc, Exception)
            self._crash("raft log fsync", exc)
            return
        self.stats.persists += 1
        self.stats.persist_seconds += time.perf_counter() - t0
        self.node.entries_persisted(target, term)
        self._apply_ahead()
        self._wake.set()  # the driver: new Readies, and the next fsync if one is due

    async def _write_then_sync(
        self,
        rd: Ready,
        records: bytes | None,
        committed: list[Entry],
        leading: bool,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        """``RunnerOptions.write_on_loop``: the writes here, then the committed entries
        applied (after the writes: a state machine may read what they wrote, never what
        a truncation is about to remove; before the fsync: they are durable on a
        majority), then the fsync in the I/O thread."""
        store = self._log
        assert store is not None
        self._write(store, rd, records, sync=False)
        self._apply(committed)
        pending = store.begin_sync()
        if pending is None:
            return
        self._push_early = leading
        try:
            await loop.run_in_executor(self._io, store.sync_descriptor, pending)
        finally:
            self._push_early = False

    def _persist(self, rd: Ready, records: bytes | None) -> None:
        """On the loop or in the I/O thread: everything here must be durable before sending."""
        store = self._log
        assert store is not None
        t0 = time.perf_counter()
        try:
            self._write(store, rd, records)
        finally:
            took = time.perf_counter() - t0
            self._persist_ewma += (took - self._persist_ewma) * 0.25

    @staticmethod
    def _write(store: DiskLog, rd: Ready, records: bytes | None, sync: bool = True) -> None:
        if rd.hard_state is not None:
            store.save_hard_state(rd.hard_state)
        if rd.snapshot is not None:
            store.save_snapshot(rd.snapshot)
        if rd.truncate_from is not None:
            store.truncate_from(rd.truncate_from)
        if rd.entries:
            store.append(rd.entries, records, sync=sync)
        if rd.compacted_to is not None:
            store.compact(rd.compacted_to)

    def _restore(self, snap: Snapshot) -> None:
        self.state_machine.restore(snap.data)
        self._applied = snap.meta.index
        while self._waiting and self._waiting[0].first <= snap.meta.index:
            self._settle(self._waiting.popleft(), ProposalError("replaced by a leader's snapshot"))

    def _send(self, messages: Sequence[Message]) -> None:
        if not messages:
            return
        by_peer: dict[str, list[Message]] = {}
        for msg in messages:
            group = by_peer.get(msg.dst)
            if group is None:
                by_peer[msg.dst] = [msg]
            else:
                group.append(msg)
        senders = self._senders
        for dst, group in by_peer.items():
            sender = senders.get(dst)
            if sender is None:
                addr = self.peers.get(dst)
                if addr is None:
                    if dst not in self._unknown_peers_logged:
                        log.warning("%s: no address for member %s", self.node_id, dst)
                        self._unknown_peers_logged.add(dst)
                    continue
                assert self._client is not None
                sender = _PeerSender(
                    self._client, dst, addr, self.options.reconnect_backoff, self._bodies
                )
                senders[dst] = sender
            sender.push(group)

    def _apply_ahead(self) -> None:
        """Apply what the core has committed without waiting for the next Ready.

        The driver hands out committed entries only between fsyncs; an ack that
        commits entries while this member is fsyncing the next batch would wait
        for that fsync. Entries up to the commit index never change, so they can
        be applied now; the next Ready's ``committed`` then skips them."""
        node = self._node
        if node is None or node.commit_index <= self._applied:
            return
        entries = node.committed_entries(self._applied + 1)
        if self.options.write_on_loop:
            # Only what this member has written: the core may hold entries stepped in
            # from a new leader that the driver has yet to write (or to truncate for).
            written = self._log
            assert written is not None
            while entries and (entries[-1].index > written.last_index
                               or written.term_at(entries[-1].index) != entries[-1].term):
                entries.pop()
        if entries and entries[0].index == self._applied + 1:
            self._apply(entries)

    def _apply(self, committed: list[Entry]) -> None:
        if not committed or committed[-1].index <= self._applied:
            return
        if committed[0].index <= self._applied:
            committed = committed[self._applied + 1 - committed[0].index :]
        sm = self.state_machine
        waiting = self._waiting
        if self._applied_waiters:
            asyncio.get_running_loop().call_soon(self._release_applied)
        for entry in committed:
            result = sm.apply(entry) if entry.type == EntryType.NORMAL else None
            self._applied = entry.index
            if not waiting:
                continue
            while waiting and waiting[0].last < entry.index:
                self._settle(waiting.popleft(), ProposalError("entry skipped"))
            if waiting and waiting[0].first <= entry.index:
                p = waiting[0]
                if entry.term != p.term:
                    waiting.popleft()
                    self._settle(
                        p, ProposalError(f"entry {entry.index} was overwritten by another leader")
                    )
                    continue
                p.results.append(result)
                if entry.index == p.last:
                    waiting.popleft()
                    if not p.future.done():
                        p.future.set_result(p.results)
        self.node.release_applied(self._applied)

    def _take_proposals(self) -> None:
        if not self._proposals:
            return
        batch, self._proposals = self._proposals, []
        node = self.node
        datas = batch[0].datas if len(batch) == 1 else [d for p in batch for d in p.datas]
        self.stats.proposals += 1
        self.stats.proposed_entries += len(datas)
        try:
            indexes = node.propose_batch(datas)
        except NotLeaderError:
            for p in batch:
                self._settle(p, self.not_leader_error())
            return
        pos = 0
        term = node.term
        for p in batch:
            p.first, p.last, p.term = indexes[pos], indexes[pos + len(p.datas) - 1], term
            pos += len(p.datas)
            self._waiting.append(p)

    async def _maybe_snapshot(self) -> None:
        node = self.node
        pending = self._pending_compact
        if pending is not None:
            # The core compacts only what it has handed out as committed.
            if self._handed_commit >= pending[0]:
                node.compact(*pending)
                self._pending_compact = None
            return
        every = self.options.snapshot_every
        index = self._applied
        assert self._log is not None
        if not every or index - node.snapshot_index < every:
            return
        if index > self._log.last_index:
            return  # applied ahead of this member's own disk: wait for it
        # The snapshot records the membership at ``index``: only take it when no
        # membership change follows, so the current membership is that one.
        later = node.entries(index + 1, node.last_index)
        if any(e.type == EntryType.CONFIG for e in later):
            return
        (entry,) = node.entries(index, index)
        data = self.state_machine.snapshot()
        snap = Snapshot(SnapshotMeta(index, entry.term, node.membership), data)
        await asyncio.get_running_loop().run_in_executor(self._io, self._log.save_snapshot, snap)
        log.info("%s: snapshot at index %d (%d bytes)", self.node_id, index, len(data))
        self._pending_compact = (index, data)
        await self._maybe_snapshot()

    def _observe(self, rd: Ready) -> None:
        seen = (rd.role, rd.term, rd.leader_id)
        if seen == self._seen:
            return
        self._seen = seen
        log.info(
            "%s: role %s, term %d, leader %s", self.node_id, rd.role.value, rd.term, rd.leader_id
        )
        if rd.role != Role.LEADER:
            # Proposals queued here cannot be proposed any more.
            for p in self._proposals:
                self._settle(p, self.not_leader_error())
            self._proposals = []
        status = self.status()
        for callback in self.on_role_change:
            try:
                callback(status)
            except Exception:
                log.exception("role change callback failed")

    @staticmethod
    def _settle(p: _Proposal, exc: BaseException) -> None:
        if not p.future.done():
            p.future.set_exception(exc)

    def _fail_all(self, exc: BaseException) -> None:
        for _, fut in self._applied_waiters:
            if not fut.done():
                fut.set_exception(exc)
        self._applied_waiters = []
        for p in [*self._proposals, *self._waiting]:
            self._settle(p, exc)
        self._proposals = []
        self._waiting.clear()
