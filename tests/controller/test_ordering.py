"""Writes to one broker group are validated against everything proposed before them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mqcluster.controller.config import ControllerConfig
from mqcluster.controller.replicated import ControllerStateMachine
from mqcluster.controller.service import ControllerService
from mqcluster.protocol.controller import (
    ApplyBrokerIdRequestHeader,
    GetNextBrokerIdRequestHeader,
    RequestCode,
    request,
)
from mqcluster.protocol.controller import ControllerResponseCode as Code
from mqcluster.wire.rpc import RpcClient
from mqcluster_testing.procs import free_addr


class SlowConsensus:
    """Always leader; applies each proposal only after the test releases it."""

    def __init__(self, sm: ControllerStateMachine) -> None:
        self.sm = sm
        self.gate = asyncio.Event()
        self.proposed: list[bytes] = []

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def propose(self, data: bytes) -> Any:
        self.proposed.append(data)
        await self.gate.wait()
        return self.sm.apply(data)

    def is_leader(self) -> bool:
        return True

    def leader_id(self) -> str | None:
        return "n0"

    def term(self) -> int:
        return 1


async def test_concurrent_claims_on_one_id_cannot_both_win(tmp_path: Path) -> None:
    consensus: list[SlowConsensus] = []

    def factory(sm: ControllerStateMachine, _registry: object) -> SlowConsensus:
        consensus.append(SlowConsensus(sm))
        return consensus[0]

    config = ControllerConfig.model_validate(
        {"controllerDLegerPeers": f"n0-{free_addr()}", "controllerStorePath": str(tmp_path)}
    )
    svc = ControllerService(config, consensus_factory=factory, run_scanner=False)
    await svc.start()
    rpc = RpcClient()
    try:
        def claim(code: str) -> Any:
            return rpc.invoke(svc.self_addr, request(
                RequestCode.CONTROLLER_APPLY_BROKER_ID,
                ApplyBrokerIdRequestHeader(
                    cluster_name="c", broker_name="g", applied_broker_id=1,
                    register_check_code=f"a:{code};{code}"),
            ))

        gate = consensus[0].gate
        gate.set()  # let the new term's readiness barrier through
        await rpc.invoke(svc.self_addr, request(
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(
                cluster_name="c", broker_name="g")
        ))
        gate.clear()
        first = asyncio.ensure_future(claim("one"))
        second = asyncio.ensure_future(claim("two"))
        other_group = asyncio.ensure_future(rpc.invoke(svc.self_addr, request(
            RequestCode.CONTROLLER_APPLY_BROKER_ID,
            ApplyBrokerIdRequestHeader(
                cluster_name="c", broker_name="h", applied_broker_id=1,
                register_check_code="a:x;x"),
        )))
        # one proposal per group is in flight; the second claim on "g" waits for the first
        async with asyncio.timeout(5):
            while len(consensus[0].proposed) < 3:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert len(consensus[0].proposed) == 3 and not second.done()
        gate.set()
        codes = sorted([(await first).code, (await second).code])
        assert codes == [Code.SUCCESS, Code.CONTROLLER_BROKER_ID_INVALID]
        assert (await other_group).code == Code.SUCCESS
        nxt = await rpc.invoke(svc.self_addr, request(
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(
                cluster_name="c", broker_name="g")
        ))
        assert nxt.ext_fields["nextBrokerId"] == "2"
    finally:
        await rpc.close()
        await svc.stop()
