"""A BrokerGroup's follower step against reads that lag behind its own writes."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from mqcluster_operator import names
from mqcluster_operator.election_followers import BrokerGroupFollower
from mqcluster_operator.election_plan import Election, ReplicaState
from mqcluster_operator.k8s import Ref

NS = "ns"
BODY = {
    "apiVersion": names.API_VERSION, "kind": "BrokerGroup",
    "metadata": {"name": "g", "namespace": NS, "uid": "u1", "generation": 1},
    "spec": {"mode": "DLedger", "replicas": 3},
}


def addr(ordinal: int) -> str:
    return f"{names.pod_dns('g', ordinal, NS)}:10911"


def pod(ordinal: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"g-{ordinal}", "namespace": NS,
                     "labels": {names.LABEL_NAME: "mqcluster-broker",
                                names.LABEL_INSTANCE: "g", names.LABEL_COMPONENT: "broker"}},
        "status": {"podIP": f"10.0.0.{ordinal + 1}",
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


class StaleReads:
    """An index that never sees the follower's status writes (the watch lags)."""

    async def get(self, ref: Ref) -> dict[str, Any] | None:
        return dict(BODY) if ref.kind == "BrokerGroup" else None

    async def list(self, ref: Ref, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        return [pod(0), pod(1)]


class RecordingApi:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.statuses: list[dict[str, Any]] = []

    async def patch(self, ref: Ref, body: Any, subresource: str | None = None) -> None:
        pass

    async def write_status(self, ref: Ref, status: Mapping[str, Any], writer: Any) -> None:
        self.statuses.append(dict(status))

    async def post_event(self, event: dict[str, Any]) -> None:
        self.events.append(event["message"])


class FixedSubscription:
    def __init__(self) -> None:
        self.latest: Election | None = None
        self.changed = asyncio.Event()
        self.probe = None

    async def close(self) -> None:
        pass


class FixedHub:
    def __init__(self) -> None:
        self.sub = FixedSubscription()

    def subscribe(self, target: Any, broker_name: str) -> FixedSubscription:
        return self.sub


class Log:
    def info(self, *args: Any) -> None:
        pass


def election(master: int, epoch: int) -> Election:
    return Election(addr(master), epoch, epoch, (ReplicaState(master, addr(master), True, True),))


async def test_a_second_master_change_names_the_first_master_though_the_index_lags() -> None:
    api, hub = RecordingApi(), FixedHub()
    follower = BrokerGroupFollower(api, hub, lambda: "2026-01-01T00:00:00Z", Log(),  # type: ignore[arg-type]
                                   reads=StaleReads())
    hub.sub.latest = election(1, 1)
    await follower.step(BODY, changed=True)
    hub.sub.latest = election(0, 2)
    await follower.step(BODY, changed=True)
    await follower.step(BODY)
    assert api.events == [
        "master changed from none to g-1 (epoch 1)",
        "master changed from g-1 to g-0 (epoch 2)",
    ]
    assert [s["masterPod"] for s in api.statuses] == ["g-1", "g-0"]
