"""What the kopf handlers share, typed: kopf's memo holds one ``OperatorState`` (key
``state``), built at login/startup (``ensure_state``) from the memo's optional entries,
through which tests and benches hand in their own API client, probes, clock, intervals
and drivers (``api``, ``probe_factory``, ``clock``, ``follow_interval``,
``reconcile_interval``, ``poll_interval``, ``migration_driver``, ``upgrade_driver``,
``connect``, ``applied``, ``reconciling``)."""

from __future__ import annotations

import asyncio
import datetime
import os
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import kopf

from .applied import AppliedCache
from .follow.context import Clock
from .follow.daemon import BrokerDriver, BrokerGroupFollower, BrokerUpgradeDriver
from .follow.election_poller import ElectionHub, ProbeFactory
from .follow.election_probes import default_probe
from .k8s import Api
from .readiness import Refresher, Tracker

Connect = Callable[..., kopf.ConnectionInfo | None]


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


@dataclass
class OperatorState:
    """``reconciling`` is a semaphore: at most ``MQCLUSTER_RECONCILE_CONCURRENCY``
    reconciliations at once, so that the resync timers of many resources, which fire
    together, do not flood the API server and delay the election followers' relabels."""

    api: Api
    probe_factory: ProbeFactory
    clock: Clock
    follow_interval: float
    """Seconds between two rounds of a follower."""
    reconcile_interval: float
    poll_interval: float
    """Seconds between two polls of a controller cluster, shared by all its BrokerGroups."""
    applied: AppliedCache
    reconciling: asyncio.Semaphore
    hub: ElectionHub
    """Does the polls of the elections for every follower."""
    readiness: Refresher
    """Ready recomputed when pods or StatefulSets change."""
    readiness_seen: Tracker
    reconciled: dict[str, list[dict[str, Any]]]
    """The reconciler's conditions as last written, by uid (shared with ``readiness``)."""
    followers: dict[tuple[str, str], BrokerGroupFollower] = field(default_factory=dict)
    """The BrokerGroup followers by namespace and name, woken by their pods' readiness."""
    object_locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    """One reconciliation of an object at a time, by uid."""
    migration_driver: BrokerDriver | None = None
    upgrade_driver: BrokerUpgradeDriver | None = None
    connect: Connect | None = None


def given(memo: Mapping[str, Any], key: str, default: Any) -> Any:
    """The memo's entry ``key`` unless it is missing or None."""
    value = memo.get(key)
    return default if value is None else value


def ensure_state(memo: MutableMapping[str, Any],
                 lock: Callable[[OperatorState, Any], Any]) -> OperatorState:
    """The memo's state, built on first use from the memo's entries and the environment
    (``lock``: how the readiness refresher takes an object's reconciliation lock)."""
    found = memo.get("state")
    if isinstance(found, OperatorState):
        return found
    api: Api = given(memo, "api", None) or Api()  # built only when none is given
    clock: Clock = given(memo, "clock", utc_now)
    probe_factory: ProbeFactory = given(memo, "probe_factory", default_probe)
    follow_interval = float(given(memo, "follow_interval",
                                  env_float("MQCLUSTER_FOLLOW_INTERVAL_SECONDS", 2.0)))
    poll_interval = float(given(memo, "poll_interval",
                                env_float("MQCLUSTER_POLL_INTERVAL_SECONDS", 0.2)))
    limit = int(env_float("MQCLUSTER_RECONCILE_CONCURRENCY", 4))
    reconciled: dict[str, list[dict[str, Any]]] = {}
    state = OperatorState(
        api=api,
        probe_factory=probe_factory,
        clock=clock,
        follow_interval=follow_interval,
        reconcile_interval=float(given(memo, "reconcile_interval", env_float(
            "MQCLUSTER_RECONCILE_INTERVAL_SECONDS", 30.0))),
        poll_interval=poll_interval,
        applied=given(memo, "applied",
                      AppliedCache(env_float("MQCLUSTER_REAPPLY_SECONDS", 600.0))),
        reconciling=given(memo, "reconciling", asyncio.Semaphore(max(1, limit))),
        hub=ElectionHub(
            probe_factory, poll_interval, health_interval=follow_interval,
            max_backoff=env_float("MQCLUSTER_POLL_MAX_BACKOFF_SECONDS", 5.0),
        ),
        readiness=Refresher(api, clock, reconciled, lock=lambda body: lock(state, body)),
        readiness_seen=Tracker(),
        reconciled=reconciled,
        migration_driver=given(memo, "migration_driver", None),
        upgrade_driver=given(memo, "upgrade_driver", None),
        connect=given(memo, "connect", None),
    )
    memo["state"] = state
    return state
