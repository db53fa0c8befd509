"""A small scenario language for RaftNode traces (testdata/*.txt).

A file is a list of blocks::

    command args...
    ----
    expected output lines
    (blank line)

Lines starting with ``#`` between blocks are comments. Messages are never
delivered by themselves: they wait in a queue until ``deliver`` (or ``drop``).

Commands
    reset                             forget all nodes and queued messages
    group a b c                       voters of nodes created afterwards
    node b [term=N] [voted=X] [log=1,1,2] [seed=N]
                                      create (or restart) a node from durable state
    time T                            set the clock (seconds)
    tick a b ...                      tick these nodes at the clock
    deliver [a->b ...]                deliver queued messages (all, or matching) once;
                                      what the receivers send is queued
    drop [a->b ...]                   drop queued messages (all, or matching)
    vote SRC DST term=N index=I lterm=T   inject a VoteRequest
    heartbeat SRC DST term=N          inject a HeartbeatRequest
    propose a DATA                    propose on a
    transfer a TARGET                 a hands leadership to TARGET
    state a b ...                     print the nodes' state

Each command prints every message it caused to be queued, each vote round that
finished, and every node whose role, term, leader or commit index changed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from mqcluster.raft.core import RaftNode
from mqcluster.raft.types import (
    AppendRequest,
    AppendResponse,
    Entry,
    EntryType,
    HardState,
    HeartbeatRequest,
    HeartbeatResponse,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    Membership,
    Message,
    NotLeaderError,
    RaftConfig,
    TimeoutNowRequest,
    VoteRequest,
    VoteResponse,
)

SEPARATOR = "----"
SCRIPT_CONFIG = RaftConfig(
    heartbeat_interval=0.1,
    max_heartbeat_leak=3,
    min_vote_interval=0.1,
    max_vote_interval=0.2,
    vote_round_timeout=0.5,
    min_take_leadership_vote_interval=0.0,
    max_take_leadership_vote_interval=0.01,
    transfer_timeout=1.0,
)


def format_entries(entries: list[Entry]) -> str:
    parts = []
    for e in entries:
        kind = "" if e.type == EntryType.NORMAL else f" {e.type.name}"
        data = f" {e.data.decode(errors='replace')}" if e.type == EntryType.NORMAL else ""
        parts.append(f"{e.index}@{e.term}{kind}{data}")
    return "[" + ", ".join(parts) + "]"


def format_message(msg: Message) -> str:
    head = f"{msg.src}->{msg.dst}"
    if isinstance(msg, VoteRequest):
        return (
            f"{head} VoteRequest term={msg.term} "
            f"ledger_end=(index={msg.ledger_end_index}, term={msg.ledger_end_term})"
        )
    if isinstance(msg, VoteResponse):
        return f"{head} VoteResponse {msg.code.name} term={msg.term}"
    if isinstance(msg, HeartbeatRequest):
        return f"{head} Heartbeat term={msg.term} commit={msg.commit_index}"
    if isinstance(msg, HeartbeatResponse):
        return f"{head} HeartbeatResponse {msg.code.name} term={msg.term}"
    if isinstance(msg, AppendRequest):
        return (
            f"{head} Append term={msg.term} prev=({msg.prev_index}, {msg.prev_term}) "
            f"entries={format_entries(msg.entries)} commit={msg.commit_index}"
        )
    if isinstance(msg, AppendResponse):
        return (
            f"{head} AppendResponse {msg.code.name} term={msg.term} "
            f"match={msg.match_index} last={msg.last_index}"
        )
    if isinstance(msg, InstallSnapshotRequest):
        meta = msg.snapshot.meta
        return f"{head} InstallSnapshot term={msg.term} snapshot=({meta.index}, {meta.term})"
    if isinstance(msg, InstallSnapshotResponse):
        return f"{head} InstallSnapshotResponse {msg.code.name} term={msg.term}"
    assert isinstance(msg, TimeoutNowRequest)
    return f"{head} TimeoutNow term={msg.term}"


def format_state(node: RaftNode) -> str:
    return (
        f"{node.id}: {node.role.name} term={node.term} leader={node.leader_id} "
        f"voted_for={node.voted_for} last={node.last_index}@{node.last_term} "
        f"commit={node.commit_index}"
    )


@dataclass
class World:
    voters: list[str] = field(default_factory=lambda: ["a", "b", "c"])
    now: float = 0.0
    nodes: dict[str, RaftNode] = field(default_factory=dict)
    queue: list[Message] = field(default_factory=list)
    durable: dict[str, tuple[HardState, list[Entry]]] = field(default_factory=dict)

    def run(self, line: str) -> list[str]:
        words = line.split()
        command, args = words[0], words[1:]
        before = {node_id: self._summary(n) for node_id, n in self.nodes.items()}
        rounds = {node_id: n.rounds_finished for node_id, n in self.nodes.items()}
        out: list[str] = []
        handler = getattr(self, f"cmd_{command}", None)
        if handler is None:
            raise ValueError(f"unknown command {command!r}")
        handler(args, out)
        for node_id, node in self.nodes.items():
            if node.rounds_finished != rounds.get(node_id, 0) and node.last_vote_round:
                tally, outcome = node.last_vote_round
                out.append(
                    f"{node_id}: round term={tally.term} -> {outcome.result.name} "
                    f"(case {outcome.case}) valid={tally.valid_num} "
                    f"accepted={tally.accepted_num} not_ready={tally.not_ready_term_num} "
                    f"bigger_ledger={tally.bigger_ledger_num} "
                    f"has_leader={tally.already_has_leader} "
                    f"known_max_term={tally.known_max_term_in_group}"
                    + (
                        ""
                        if node.role.name == "LEADER"
                        else f" next_vote_at={node.next_time_to_request_vote:.3f}"
                    )
                )
        for node_id, node in self.nodes.items():
            if command != "state" and before.get(node_id) != self._summary(node):
                out.append(format_state(node))
        return out

    @staticmethod
    def _summary(node: RaftNode) -> tuple[object, ...]:
        return (node.role, node.term, node.leader_id, node.voted_for, node.commit_index)

    # ---------------------------------------------------------------- plumbing

    def _collect(self, node: RaftNode, out: list[str]) -> None:
        while node.has_ready():
            rd = node.ready()
            hard_state, log = self.durable[node.id]
            if rd.hard_state is not None:
                hard_state = rd.hard_state
            if rd.truncate_from is not None:
                log = [e for e in log if e.index < rd.truncate_from]
            log = log + rd.entries
            self.durable[node.id] = (hard_state, log)
            for msg in rd.messages:
                out.append(format_message(msg))
                self.queue.append(msg)
            node.advance(rd)

    @staticmethod
    def _options(args: list[str]) -> dict[str, str]:
        return dict(arg.split("=", 1) for arg in args if "=" in arg)

    @staticmethod
    def _matches(msg: Message, filters: list[str]) -> bool:
        return not filters or f"{msg.src}->{msg.dst}" in filters

    # ---------------------------------------------------------------- commands

    def cmd_reset(self, args: list[str], out: list[str]) -> None:
        self.nodes.clear()
        self.queue.clear()
        self.durable.clear()

    def cmd_group(self, args: list[str], out: list[str]) -> None:
        self.voters = args

    def cmd_node(self, args: list[str], out: list[str]) -> None:
        node_id, opts = args[0], self._options(args[1:])
        terms = [int(t) for t in opts["log"].split(",")] if opts.get("log") else []
        entries = [
            Entry(index=i, term=t, type=EntryType.NORMAL, data=f"e{i}".encode())
            for i, t in enumerate(terms, start=1)
        ]
        hard_state = HardState(int(opts.get("term", "0")), opts.get("voted"))
        self.durable[node_id] = (hard_state, entries)
        self.nodes[node_id] = RaftNode(
            node_id,
            SCRIPT_CONFIG,
            Membership(voters=list(self.voters)),
            hard_state=hard_state,
            snapshot=None,
            entries=entries,
            rng=random.Random(int(opts.get("seed", "1"))),
            now=self.now,
        )

    def cmd_time(self, args: list[str], out: list[str]) -> None:
        self.now = float(args[0])

    def cmd_tick(self, args: list[str], out: list[str]) -> None:
        for node_id in args or sorted(self.nodes):
            node = self.nodes[node_id]
            node.tick(self.now)
            self._collect(node, out)

    def cmd_deliver(self, args: list[str], out: list[str]) -> None:
        batch = [m for m in self.queue if self._matches(m, args)]
        self.queue = [m for m in self.queue if not self._matches(m, args)]
        for msg in batch:
            node = self.nodes.get(msg.dst)
            if node is None:
                continue
            node.step(msg, self.now)
            self._collect(node, out)

    def cmd_drop(self, args: list[str], out: list[str]) -> None:
        dropped = [m for m in self.queue if self._matches(m, args)]
        self.queue = [m for m in self.queue if not self._matches(m, args)]
        out.extend(f"dropped {format_message(m)}" for m in dropped)

    def cmd_vote(self, args: list[str], out: list[str]) -> None:
        src, dst, opts = args[0], args[1], self._options(args[2:])
        msg = VoteRequest(
            src=src, dst=dst, term=int(opts["term"]),
            ledger_end_index=int(opts.get("index", "0")),
            ledger_end_term=int(opts.get("lterm", "0")),
        )  # fmt: skip
        self.nodes[dst].step(msg, self.now)
        self._collect(self.nodes[dst], out)

    def cmd_heartbeat(self, args: list[str], out: list[str]) -> None:
        src, dst, opts = args[0], args[1], self._options(args[2:])
        msg = HeartbeatRequest(src=src, dst=dst, term=int(opts["term"]))
        self.nodes[dst].step(msg, self.now)
        self._collect(self.nodes[dst], out)

    def cmd_propose(self, args: list[str], out: list[str]) -> None:
        node = self.nodes[args[0]]
        try:
            index = node.propose(args[1].encode())
        except NotLeaderError as err:
            out.append(f"{type(err).__name__}: leader={err.leader_id}")
            return
        out.append(f"{node.id}: proposed at {index}")
        self._collect(node, out)

    def cmd_transfer(self, args: list[str], out: list[str]) -> None:
        node = self.nodes[args[0]]
        node.transfer_leadership(args[1], self.now)
        self._collect(node, out)

    def cmd_state(self, args: list[str], out: list[str]) -> None:
        out.extend(format_state(self.nodes[node_id]) for node_id in args or sorted(self.nodes))


@dataclass
class Block:
    comments: list[str]
    command: str
    expected: list[str]


def parse(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    comments: list[str] = []
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.startswith("#"):
            comments.append(line)
            i += 1
            continue
        command = line
        if i + 1 >= len(lines) or lines[i + 1] != SEPARATOR:
            raise ValueError(f"line {i + 2}: expected {SEPARATOR!r} after {command!r}")
        i += 2
        expected: list[str] = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i])
            i += 1
        blocks.append(Block(comments, command, expected))
        comments = []
    return blocks


def render(blocks: list[Block]) -> str:
    parts: list[str] = []
    for block in blocks:
        parts.extend(block.comments)
        parts.append(block.command)
        parts.append(SEPARATOR)
        parts.extend(block.expected)
        parts.append("")
    while parts and not parts[-1].strip():
        parts.pop()
    return "\n".join(parts) + "\n"


def run_file(path: Path) -> tuple[str, str]:
    """Return (expected text, actual text) for a scenario file."""
    text = path.read_text()
    blocks = parse(text)
    world = World()
    actual = [Block(b.comments, b.command, world.run(b.command)) for b in blocks]
    return render(blocks), render(actual)
