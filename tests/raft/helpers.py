"""Small builders for rule tests that drive RaftNode by hand."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from mqcluster.raft.core import RaftNode
from mqcluster.raft.types import (
    Entry,
    EntryType,
    HardState,
    Membership,
    Message,
    RaftConfig,
    Ready,
    Snapshot,
)

M = TypeVar("M")

# Round numbers keep arithmetic exact in assertions.
CONFIG = RaftConfig(
    heartbeat_interval=0.1,
    max_heartbeat_leak=3,
    min_vote_interval=0.1,
    max_vote_interval=0.2,
    vote_round_timeout=0.5,
    min_take_leadership_vote_interval=0.0,
    max_take_leadership_vote_interval=0.01,
    max_inflight_appends=3,
    max_batch_entries=2,
    max_batch_bytes=1 << 20,
    append_retry_timeout=0.3,
    transfer_timeout=1.0,
)


def config(**changes: Any) -> RaftConfig:
    return dataclasses.replace(CONFIG, **changes)


def entries_with_terms(*terms: int) -> list[Entry]:
    """Entries 1..n whose terms are ``terms``."""
    return [
        Entry(index=i, term=t, type=EntryType.NORMAL, data=f"e{i}".encode())
        for i, t in enumerate(terms, start=1)
    ]


def new_node(
    node_id: str,
    voters: Iterable[str] = ("a", "b", "c"),
    *,
    learners: Iterable[str] = (),
    term: int = 0,
    voted_for: str | None = None,
    entries: list[Entry] | None = None,
    snapshot: Snapshot | None = None,
    now: float = 0.0,
    seed: int = 1,
    cfg: RaftConfig | None = None,
) -> RaftNode:
    return RaftNode(
        node_id,
        cfg or CONFIG,
        Membership(voters=list(voters), learners=list(learners)),
        hard_state=HardState(term, voted_for),
        snapshot=snapshot,
        entries=entries or [],
        rng=random.Random(seed),
        now=now,
    )


def take(node: RaftNode) -> Ready:
    """Collect and acknowledge the node's Ready (as if persisted, sent and applied)."""
    rd = node.ready()
    node.advance(rd)
    return rd


def sent(node: RaftNode) -> list[Message]:
    return take(node).messages if node.has_ready() else []


def only(messages: list[Message], kind: type[M], dst: str | None = None) -> list[M]:
    return [m for m in messages if isinstance(m, kind) and (dst is None or m.dst == dst)]


def one(messages: list[Message], kind: type[M], dst: str | None = None) -> M:
    found = only(messages, kind, dst)
    assert len(found) == 1, f"expected one {kind.__name__} to {dst}, got {messages}"
    return found[0]


def exchange(nodes: dict[str, RaftNode], messages: Sequence[Message], now: float) -> list[Message]:
    """Deliver ``messages`` and return everything the receivers sent in turn."""
    out: list[Message] = []
    for msg in messages:
        node = nodes.get(msg.dst)
        if node is None:
            continue
        node.step(msg, now)
        out.extend(sent(node))
    return out


def settle(
    nodes: dict[str, RaftNode], messages: list[Message], now: float, rounds: int = 50
) -> None:
    """Keep delivering until the network is quiet (no loss, no delay)."""
    for _ in range(rounds):
        if not messages:
            return
        messages = exchange(nodes, messages, now)
    raise AssertionError("network did not settle")


def elect(nodes: dict[str, RaftNode], leader: str, now: float = 0.0) -> None:
    """Make ``leader`` win: it campaigns, voters that lag in term catch up, it re-votes."""
    node = nodes[leader]
    for _ in range(3):
        node.tick(now)
        settle(nodes, sent(node), now)
        if node.role.name == "LEADER":
            settle(nodes, sent(node), now)
            return
        for other in nodes.values():
            if other is not node and other.need_increase_term_immediately:
                other.tick(now)
                sent(other)
    raise AssertionError(f"{leader} did not win: {node.role} {node.last_parse_result}")
