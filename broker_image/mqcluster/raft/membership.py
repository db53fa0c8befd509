"""Group membership: the CONFIG entry payload and the rules of single-node changes.

A configuration takes effect as soon as its entry is in a node's log (not when it
commits), so a truncated CONFIG entry reverts the membership. Only one change may
be uncommitted at a time, which keeps every two successive majorities overlapping.
"""

from __future__ import annotations

import json

from mqcluster.raft.types import Membership


def encode_membership(membership: Membership) -> bytes:
    return json.dumps(
        {"voters": membership.voters, "learners": membership.learners}, sort_keys=True
    ).encode()


def decode_membership(data: bytes) -> Membership:
    raw = json.loads(data.decode())
    return Membership(
        voters=[str(v) for v in raw["voters"]], learners=[str(v) for v in raw["learners"]]
    )


def copy_membership(membership: Membership) -> Membership:
    return Membership(voters=list(membership.voters), learners=list(membership.learners))


def with_learner(membership: Membership, node: str) -> Membership:
    if node in membership.voters or node in membership.learners:
        raise ValueError(f"{node} is already a member")
    return Membership(voters=list(membership.voters), learners=[*membership.learners, node])


def with_promoted(membership: Membership, node: str) -> Membership:
    if node not in membership.learners:
        raise ValueError(f"{node} is not a learner")
    return Membership(
        voters=[*membership.voters, node],
        learners=[n for n in membership.learners if n != node],
    )


def without_member(membership: Membership, node: str) -> Membership:
    if node not in membership.voters and node not in membership.learners:
        raise ValueError(f"{node} is not a member")
    voters = [n for n in membership.voters if n != node]
    if not voters:
        raise ValueError("cannot remove the last voter")
    return Membership(voters=voters, learners=[n for n in membership.learners if n != node])
