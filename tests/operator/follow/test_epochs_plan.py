"""Epoch conflicts between a group's replicas and its master, on tables of states."""

from __future__ import annotations

import pytest

from mqcluster_operator.follow.epochs_plan import ReplicaEpochs, find_conflicts, plan_epochs

# The master's history: epoch 1 from 0, epoch 2 from 100, epoch 4 from 250 (max 300).
MASTER = ReplicaEpochs(((1, 0, 100), (2, 100, 250), (4, 250, 300)), 300)


def replica(*entries: tuple[int, int, int]) -> ReplicaEpochs:
    return ReplicaEpochs(entries, entries[-1][2] if entries else 0)


@pytest.mark.parametrize(("theirs", "conflict"), [
    (replica((1, 0, 100), (2, 100, 250), (4, 250, 300)), False),  # in sync
    (replica((1, 0, 100), (2, 100, 180)), False),                  # behind: catches up
    (replica((1, 0, 100), (3, 100, 400)), False),                  # diverged: truncates to 100
    (replica(), False),                                            # empty: copies everything
    (replica((7, 0, 50)), True),                                   # another life of the group
    (replica((9, 0, 80), (11, 80, 120)), True),
    (ReplicaEpochs((), 40), True),                                 # data but no epochs
])
def test_a_replica_conflicts_only_when_truncation_cannot_repair_it(
        theirs: ReplicaEpochs, conflict: bool) -> None:
    found = find_conflicts("g-0", {"g-0": MASTER, "g-1": theirs})
    assert ("g-1" in found) == conflict


def test_nothing_is_found_without_the_masters_entries() -> None:
    assert find_conflicts(None, {"g-1": replica((7, 0, 50))}) == {}
    assert find_conflicts("g-0", {"g-1": replica((7, 0, 50))}) == {}


def test_status_entries_leave_the_current_epoch_open() -> None:
    assert MASTER.status() == [
        {"epoch": 1, "startOffset": 0, "endOffset": 100},
        {"epoch": 2, "startOffset": 100, "endOffset": 250},
        {"epoch": 4, "startOffset": 250},
    ]


PODS = ["g-0", "g-1", "g-2"]
READ = ["g-0", "g-1", "g-2"]


@pytest.mark.parametrize(
    ("found", "read", "recorded", "annotation", "conflicts", "degraded", "events", "wipe"), [
        # a new conflict: Degraded, one Warning naming the pod and the annotation
        ({"g-2": "no common epoch"}, READ, [], None, ["g-2"], True,
         [("Warning", "g-2 shares no epoch with master g-0")], None),
        # still there: no new event, status unchanged
        ({"g-2": "no common epoch"}, READ, ["g-2"], None, None, True, [], None),
        # not read this round (pod restarting): kept
        ({}, ["g-0", "g-1"], ["g-2"], None, None, True, [], None),
        # gone: Degraded False, one Normal event
        ({}, READ, ["g-2"], None, [], False, [("Normal", "g-2's epochs agree")], None),
        # approved wipe: deleted, no longer reported
        ({"g-2": "no common epoch"}, READ, ["g-2"], "g-2", [], False,
         [("Normal", "wiping the store of g-2")], "g-2"),
        # the master is never wiped
        ({}, READ, [], "g-0", None, False, [("Warning", "wipe of g-0 refused")], None),
        ({}, READ, [], "g-7", None, False, [("Warning", "wipe of g-7 refused")], None),
        ({}, READ, [], None, None, False, [], None),
    ])
def test_conflicts_are_reported_until_a_person_approves_a_wipe(
        found: dict[str, str], read: list[str], recorded: list[str], annotation: str | None,
        conflicts: list[str] | None, degraded: bool, events: list[tuple[str, str]],
        wipe: str | None) -> None:
    step = plan_epochs(found, read, recorded, "g-0", PODS, annotation)
    assert step.conflicts == conflicts
    assert step.condition is not None
    assert step.condition[0] is degraded
    assert step.condition[1] == ("EpochConflict" if degraded else "EpochsConsistent")
    if degraded:
        assert "g-2" in step.condition[2]
    assert len(step.events) == len(events)
    for (kind, message), (want_kind, want) in zip(step.events, events, strict=True):
        assert kind == want_kind and message.startswith(want), message
    assert step.wipe == wipe
    assert step.clear_annotation == (annotation is not None)
