"""Following the election: a BrokerGroup's follower step against reads that lag behind
its own writes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mqcluster.protocol.election import Election, ReplicaState
from mqcluster_operator.follow.daemon import BrokerGroupFollower
from mqcluster_operator.k8s import Ref

from .fakes import BODY, FixedHub, Log, addr, pod


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

    async def write_status(self, ref: Ref, status: Mapping[str, Any], writer: Any,
                           fields_first: bool = False) -> None:
        self.statuses.append(dict(status))

    async def post_event(self, event: dict[str, Any]) -> None:
        self.events.append(event["message"])


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
    assert [s["masterPod"] for s in api.statuses if "masterPod" in s] == ["g-1", "g-0"]
