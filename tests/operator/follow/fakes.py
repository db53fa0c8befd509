"""Fakes for the follower's step tests: a hub that hands out one fixed election, and
worlds that play the API, the reconciler and the kubelet around the follower."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

from mqcluster.protocol.election import Election, ReplicaState
from mqcluster_operator import names
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


class MigrationWorld:
    """A BrokerGroup, its Controller and pods; ``settle`` plays the reconciler and the
    kubelet after each follower step: objects rendered as the recorded migration says,
    pods stopped or started, replicas registering with the controller once running."""

    def __init__(self) -> None:
        self.body: dict[str, Any] = {
            "apiVersion": names.API_VERSION, "kind": "BrokerGroup",
            "metadata": {"name": "g", "namespace": NS, "uid": "u1", "generation": 2,
                         "annotations": {}},
            "spec": {"mode": "Controller", "replicas": 3, "controllerRef": {"name": "ctl"}},
            "status": {"appliedMode": "DLedger", "readyReplicas": 3},
        }
        self.controller = {
            "apiVersion": names.API_VERSION, "kind": "Controller",
            "metadata": {"name": "ctl", "namespace": NS},
            "spec": {"replicas": 3},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
        self.pods = [pod(i) for i in range(3)]
        self.hub = FixedHub()
        self.events: list[str] = []
        self.steps: list[str] = []
        self.other_groups: list[dict[str, Any]] = []

    async def get(self, ref: Ref) -> dict[str, Any] | None:
        return {"BrokerGroup": self.body, "Controller": self.controller}.get(ref.kind)

    async def list(self, ref: Ref, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        if ref.kind == "BrokerGroup":
            return [self.body, *self.other_groups]
        return list(self.pods)

    async def patch(self, ref: Ref, body: Any, subresource: str | None = None) -> None:
        for key, value in (body.get("metadata", {}).get("annotations") or {}).items():
            if value is None:
                self.body["metadata"]["annotations"].pop(key, None)

    async def write_status(self, ref: Ref, status: Mapping[str, Any], writer: Any,
                           fields_first: bool = False) -> None:
        for key, value in status.items():
            if value is None:
                self.body["status"].pop(key, None)
            else:
                self.body["status"][key] = value
        step = (status.get("migration") or {}).get("step")
        if step and (not self.steps or self.steps[-1] != step):
            self.steps.append(step)

    async def post_event(self, event: dict[str, Any]) -> None:
        self.events.append(f"{event['reason']}: {event['message']}")

    def settle(self) -> None:
        from mqcluster_operator.follow.migration_plan import rendering
        from mqcluster_operator.models import BrokerGroupSpec

        spec = BrokerGroupSpec.model_validate(self.body["spec"])
        status = self.body["status"]
        render = rendering(spec, status.get("appliedMode"), status.get("migration"))
        status["appliedMode"] = render.mode
        self.pods = [] if render.stopped else [pod(i) for i in range(3)]
        status["readyReplicas"] = len(self.pods)
        if render.mode == "DLedger":
            self.hub.sub.latest = Election(addr(0), 3, None, ())
        else:
            replicas = tuple(ReplicaState(i, addr(i), True, True) for i in range(3))
            self.hub.sub.latest = Election(addr(1), 1, 1, replicas)


class LaggingWorld(MigrationWorld):
    """Reads answer from the group as it was before the last round's writes, as kopf's
    index does while the watch has not yet delivered them."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = copy.deepcopy(self.body)

    async def get(self, ref: Ref) -> dict[str, Any] | None:
        return {"BrokerGroup": self.seen, "Controller": self.controller}.get(ref.kind)

    async def list(self, ref: Ref, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        return [self.seen] if ref.kind == "BrokerGroup" else list(self.pods)
