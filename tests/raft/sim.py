"""Deterministic simulation of a RaftNode group: simulated clock, in-memory network.

The network delays (so also reorders), drops, duplicates and partitions messages;
nodes crash and restart from their durable state only (hard state, persisted
entries, snapshot). With ``leader_sync_behind`` a leader's new entries are only
written when it advances (``entries_durable=False``); a simulated fsync makes
them durable a little later, and a crash before it keeps a random prefix of them
(what the page cache happened to write back). Everything is driven by one
seeded ``random.Random``. The checker records the safety properties as the run
goes and raises ``SafetyViolation`` at the first breach.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from mqcluster.raft.core import RaftNode
from mqcluster.raft.types import (
    Entry,
    EntryType,
    HardState,
    Membership,
    Message,
    NotLeaderError,
    RaftConfig,
    Ready,
    Role,
    Snapshot,
)


class SafetyViolation(AssertionError):
    pass


@dataclass
class Durable:
    """What survives a crash."""

    hard_state: HardState = field(default_factory=lambda: HardState(0, None))
    snapshot: Snapshot | None = None
    entries: list[Entry] = field(default_factory=list)

    def first_index(self) -> int:
        return self.entries[0].index if self.entries else self.last_index() + 1

    def last_index(self) -> int:
        if self.entries:
            return self.entries[-1].index
        return self.snapshot.meta.index if self.snapshot else 0


@dataclass
class StateMachine:
    """A running digest of applied entries, so snapshots can be checked too."""

    applied: int = 0
    digest: bytes = b""

    def apply(self, entry: Entry) -> None:
        if entry.index != self.applied + 1:
            raise SafetyViolation(f"applied {entry.index} after {self.applied}")
        self.applied = entry.index
        if entry.type == EntryType.NORMAL:
            self.digest = hashlib.blake2b(self.digest + entry.data, digest_size=8).digest()

    def snapshot_data(self) -> bytes:
        return self.applied.to_bytes(8, "big") + self.digest

    def restore(self, data: bytes) -> None:
        self.applied = int.from_bytes(data[:8], "big")
        self.digest = data[8:]


@dataclass
class SimNode:
    node_id: str
    raft: RaftNode
    durable: Durable
    sm: StateMachine
    alive: bool = True
    written: list[Entry] = field(default_factory=list)  # a leader's entries awaiting fsync


@dataclass
class NetworkFaults:
    min_delay: float = 0.001
    max_delay: float = 0.010
    drop: float = 0.0
    duplicate: float = 0.0


class Checker:
    """Election safety, state-machine safety and leader completeness, online."""

    def __init__(self) -> None:
        self.leaders: dict[int, str] = {}
        self.committed: dict[int, tuple[int, bytes]] = {}  # index -> (term, data)
        self.digests: dict[int, bytes] = {}  # applied index -> state digest

    def saw_role(self, node: SimNode) -> None:
        raft = node.raft
        if raft.role != Role.LEADER:
            return
        holder = self.leaders.setdefault(raft.term, node.node_id)
        if holder != node.node_id:
            raise SafetyViolation(f"two leaders in term {raft.term}: {holder} and {node.node_id}")

    def became_leader(self, node: SimNode) -> None:
        raft = node.raft
        for index, (term, data) in self.committed.items():
            if index <= raft.snapshot_index:
                continue
            got = raft.entries(index, index)
            if not got or got[0].term != term or got[0].data != data:
                raise SafetyViolation(
                    f"leader {node.node_id} term {raft.term} lacks committed entry {index}"
                )

    def applied(self, node: SimNode, entry: Entry) -> None:
        seen = self.committed.setdefault(entry.index, (entry.term, entry.data))
        if seen != (entry.term, entry.data):
            raise SafetyViolation(
                f"{node.node_id} applied {entry.index}@{entry.term}, others {seen[0]}"
            )
        digest = self.digests.setdefault(entry.index, node.sm.digest)
        if digest != node.sm.digest:
            raise SafetyViolation(f"{node.node_id} state diverged at {entry.index}")

    def restored(self, node: SimNode) -> None:
        digest = self.digests.setdefault(node.sm.applied, node.sm.digest)
        if digest != node.sm.digest:
            raise SafetyViolation(f"{node.node_id} snapshot diverged at {node.sm.applied}")


def check_log_matching(nodes: list[SimNode]) -> None:
    """If two logs hold an entry with the same index and term, all before it are equal."""
    logs = [
        (node.node_id, {e.index: e for e in node.raft.entries(1, node.raft.last_index)})
        for node in nodes
    ]
    for i, (id_a, log_a) in enumerate(logs):
        for id_b, log_b in logs[i + 1 :]:
            common = sorted(set(log_a) & set(log_b), reverse=True)
            anchor = next((k for k in common if log_a[k].term == log_b[k].term), None)
            if anchor is None:
                continue
            for k in common:
                if k <= anchor and log_a[k] != log_b[k]:
                    raise SafetyViolation(f"logs of {id_a} and {id_b} differ at {k} <= {anchor}")


class Simulation:
    TICK = 0.01

    def __init__(
        self,
        node_ids: list[str],
        seed: int,
        config: RaftConfig | None = None,
        faults: NetworkFaults | None = None,
        membership: Membership | None = None,
        leader_sync_behind: bool = False,
    ) -> None:
        self.rng = random.Random(seed)
        self.leader_sync_behind = leader_sync_behind
        self.config = config or RaftConfig()
        self.faults = faults or NetworkFaults()
        self.membership = membership or Membership(voters=list(node_ids), learners=[])
        self.now = 0.0
        self.checker = Checker()
        self.nodes: dict[str, SimNode] = {}
        self.blocked: set[tuple[str, str]] = set()
        self._queue: list[tuple[float, int, str, Message | None]] = []
        self._seq = 0
        self._epoch: dict[str, int] = {}  # bumps on crash so stale ticks die
        self._started_with: dict[str, Membership] = {}  # members added after the start
        self.delivered = 0
        for node_id in node_ids:
            self.nodes[node_id] = self._boot(node_id, Durable(), StateMachine())

    # ---------------------------------------------------------------- node lifecycle

    def _restored(self, node_id: str, durable: Durable, rng: random.Random) -> RaftNode:
        """A core restarted from ``durable``, with the membership it was started with."""
        return RaftNode(
            node_id,
            self.config,
            self._started_with.get(node_id, self.membership),
            hard_state=HardState(durable.hard_state.term, durable.hard_state.voted_for),
            snapshot=durable.snapshot,
            entries=list(durable.entries),
            rng=rng,
            now=self.now,
        )

    def _boot(self, node_id: str, durable: Durable, sm: StateMachine) -> SimNode:
        raft = self._restored(node_id, durable, random.Random(self.rng.random()))
        node = SimNode(node_id, raft, durable, sm)
        self._epoch[node_id] = self._epoch.get(node_id, 0) + 1
        self._schedule(
            self.now + self.rng.random() * self.TICK, f"tick:{node_id}:{self._epoch[node_id]}"
        )
        return node

    def add_node(self, node_id: str, membership: Membership) -> SimNode:
        # Restarts use the same start-up membership, as a process restarts with its flags.
        self._started_with[node_id] = membership
        node = self._boot(node_id, Durable(), StateMachine())
        self.nodes[node_id] = node
        return node

    def wipe(self, node_id: str, membership: Membership) -> SimNode:
        """Replace a node by an empty one (Raft membership: clear it before adding it back)."""
        self.crash(node_id)
        return self.add_node(node_id, membership)

    def crash(self, node_id: str) -> None:
        node = self.nodes[node_id]
        node.alive = False
        self._epoch[node_id] += 1
        if node.written:
            kept = self.rng.randint(0, len(node.written))
            node.written = node.written[:kept]
            self._sync_written(node)

    def restart(self, node_id: str) -> None:
        node = self.nodes[node_id]
        sm = StateMachine()
        if node.durable.snapshot is not None:
            sm.restore(node.durable.snapshot.data)
        self.nodes[node_id] = self._boot(node_id, node.durable, sm)

    def membership_view(self, node_id: str) -> Membership:
        """The membership ``node_id`` acts on: live, its current one; dead, the one it
        would restart with (from its durable log)."""
        node = self.nodes[node_id]
        if node.alive:
            return node.raft.membership
        return self._restored(node_id, node.durable, random.Random(0)).membership

    # ---------------------------------------------------------------- network

    def partition(self, *groups: list[str]) -> None:
        self.blocked = set()
        for a in self.nodes:
            for b in self.nodes:
                if a != b and not any(a in g and b in g for g in groups):
                    self.blocked.add((a, b))

    def isolate(self, node_id: str) -> None:
        for other in self.nodes:
            if other != node_id:
                self.blocked.add((node_id, other))
                self.blocked.add((other, node_id))

    def heal(self) -> None:
        self.blocked = set()

    def _send(self, msg: Message) -> None:
        faults = self.faults
        if (msg.src, msg.dst) in self.blocked or self.rng.random() < faults.drop:
            return
        copies = 2 if self.rng.random() < faults.duplicate else 1
        for _ in range(copies):
            delay = faults.min_delay + self.rng.random() * (faults.max_delay - faults.min_delay)
            self._schedule(self.now + delay, "msg", msg)

    def _schedule(self, at: float, kind: str, msg: Message | None = None) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, kind, msg))

    # ---------------------------------------------------------------- running

    def run_until(self, until: float) -> None:
        queue = self._queue
        while queue and queue[0][0] <= until:
            at, _, kind, msg = heapq.heappop(queue)
            self.now = at
            if msg is not None:
                node = self.nodes.get(msg.dst)
                if node is None or not node.alive or (msg.src, msg.dst) in self.blocked:
                    continue
                self.delivered += 1
                node.raft.step(msg, at)
                self.drain(node)
            elif kind.startswith("fsync:"):
                _, node_id, epoch, index, term = kind.split(":")
                node = self.nodes[node_id]
                if not node.alive or int(epoch) != self._epoch[node_id]:
                    continue
                if node.raft.role == Role.LEADER and node.raft.term == int(term):
                    self._sync_written(node, int(index))
                    node.raft.entries_persisted(int(index), int(term))
                    self.drain(node)
            else:
                _, node_id, epoch = kind.split(":")
                node = self.nodes[node_id]
                if not node.alive or int(epoch) != self._epoch[node_id]:
                    continue
                node.raft.tick(at)
                self.drain(node)
                self._schedule(at + self.TICK, kind)
        self.now = until

    def drain(self, node: SimNode) -> None:
        raft = node.raft
        was_leader_term = self.checker.leaders.get(raft.term) == node.node_id
        self.checker.saw_role(node)
        if raft.role == Role.LEADER and not was_leader_term:
            self.checker.became_leader(node)
        while raft.has_ready():
            rd = raft.ready()
            behind = self.leader_sync_behind and self._may_write_behind(rd)
            if behind:
                node.written.extend(rd.entries)
                index = rd.entries[-1].index
                delay = self.rng.random() * 0.008  # the runner waits 5 ms, then fsyncs
                epoch = self._epoch[node.node_id]
                self._schedule(self.now + delay, f"fsync:{node.node_id}:{epoch}:{index}:{rd.term}")
            else:
                self._persist(node, rd)
            for msg in rd.messages:
                self._send(msg)
            for entry in rd.committed:
                if entry.index <= node.sm.applied:
                    continue
                node.sm.apply(entry)
                self.checker.applied(node, entry)
            raft.advance(rd, entries_durable=not behind)
            self.checker.saw_role(node)

    @staticmethod
    def _may_write_behind(rd: Ready) -> bool:
        """What the runner leaves to a later fsync: a leader's plain entry appends."""
        return (
            rd.role == Role.LEADER and bool(rd.entries) and rd.hard_state is None
            and rd.snapshot is None and rd.truncate_from is None and rd.compacted_to is None
        )  # fmt: skip

    def _sync_written(self, node: SimNode, upto: int | None = None) -> None:
        """Written entries (up to ``upto``) become durable, as an fsync makes them."""
        keep = [e for e in node.written if upto is not None and e.index > upto]
        for entry in node.written[: len(node.written) - len(keep)]:
            if entry.index != node.durable.last_index() + 1:
                raise SafetyViolation(
                    f"{node.node_id}: synced {entry.index} after {node.durable.last_index()}"
                )
            node.durable.entries.append(entry)
        node.written = keep

    def _persist(self, node: SimNode, rd: Ready) -> None:
        # An fsync of the log makes everything written before it durable too.
        self._sync_written(node)
        durable = node.durable
        if rd.hard_state is not None:
            durable.hard_state = HardState(rd.hard_state.term, rd.hard_state.voted_for)
        if rd.snapshot is not None:
            durable.snapshot = rd.snapshot
            durable.entries = [e for e in durable.entries if e.index > rd.snapshot.meta.index]
            node.sm.restore(rd.snapshot.data)
            self.checker.restored(node)
        if rd.truncate_from is not None:
            durable.entries = [e for e in durable.entries if e.index < rd.truncate_from]
        for entry in rd.entries:
            if entry.index != durable.last_index() + 1:
                raise SafetyViolation(
                    f"{node.node_id}: persisted {entry.index} after {durable.last_index()}"
                )
            durable.entries.append(entry)
        if rd.compacted_to is not None:
            durable.entries = [e for e in durable.entries if e.index > rd.compacted_to]

    # ---------------------------------------------------------------- helpers for tests

    def compact(self, node_id: str) -> None:
        node = self.nodes[node_id]
        if not node.alive or node.sm.applied <= node.raft.snapshot_index:
            return
        # The runner stores the snapshot durably before telling the core.
        snap_index = node.sm.applied
        data = node.sm.snapshot_data()
        node.raft.compact(snap_index, data)
        assert node.raft.snapshot_index == snap_index
        snapshot = node.raft.snapshot
        assert snapshot is not None
        node.durable.snapshot = snapshot
        self.drain(node)

    def leaders(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.alive and n.raft.role == Role.LEADER]

    def leader(self) -> SimNode | None:
        """The live leader with the highest term, if any."""
        live = self.leaders()
        return max(live, key=lambda n: n.raft.term) if live else None

    def propose(self, data: bytes) -> tuple[str, int] | None:
        leader = self.leader()
        if leader is None:
            return None
        try:
            index = leader.raft.propose(data)
        except NotLeaderError:
            return None
        self.drain(leader)
        return leader.node_id, index

    def live(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.alive]


def run_until_true(sim: Simulation, predicate: Callable[[], bool], timeout: float) -> bool:
    """Advance in small steps until ``predicate`` holds; False if ``timeout`` passes."""
    deadline = sim.now + timeout
    while sim.now < deadline:
        if predicate():
            return True
        sim.run_until(min(deadline, sim.now + 0.01))
    return predicate()


def stable_leader(sim: Simulation, timeout: float = 3.0) -> SimNode:
    """Wait for a leader whose log holds a committed entry of its own term."""

    def ready() -> bool:
        leader = sim.leader()
        return leader is not None and leader.raft.commit_index >= leader.raft.last_index

    if not run_until_true(sim, ready, timeout):
        raise AssertionError("no leader")
    leader = sim.leader()
    assert leader is not None
    return leader
