"""In-process controller fixtures: a ControllerService on a real socket, single-node consensus."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from mqcluster.controller.config import ControllerConfig
from mqcluster.controller.consensus import LocalConsensus
from mqcluster.controller.service import ControllerService
from mqcluster_testing.procs import free_addr


class FakeClock:
    def __init__(self, start_ms: int = 1_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


ServiceFactory = Callable[..., ControllerService]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def make_service(
    tmp_path: Path, clock: FakeClock
) -> AsyncIterator[Callable[..., ControllerService]]:
    started: list[ControllerService] = []

    def make(**overrides: object) -> ControllerService:
        addr = free_addr()
        props: dict[str, object] = {
            "controllerDLegerPeers": f"n0-{addr}",
            "controllerDLegerSelfId": "n0",
            "controllerStorePath": str(tmp_path / "store"),
            "brokerHeartbeatTimeoutMills": 2000,
        }
        props.update(overrides)
        config = ControllerConfig.model_validate(props)
        svc = ControllerService(
            config,
            consensus_factory=lambda sm, _reg: LocalConsensus("n0", sm),
            clock_ms=clock,
            run_scanner=False,
        )
        started.append(svc)
        return svc

    try:
        yield make
    finally:
        for svc in started:
            await svc.stop()
