"""What every controller-mode process cluster starts before its brokers, and stops after them:
the controllers (active one elected), one ``mqnamesrv`` and a controller client."""

from __future__ import annotations

from pathlib import Path

from mqcluster.client.controller import ControllerClient
from mqcluster_testing.broker.procs import NamesrvProc, start_namesrv
from mqcluster_testing.controller.localcluster import LocalControllerCluster


async def start_control_plane(
    tmp: Path, controllers: LocalControllerCluster
) -> tuple[NamesrvProc, ControllerClient]:
    tmp.mkdir(parents=True, exist_ok=True)
    controllers.start_all()
    await controllers.wait_active(30)
    namesrv = await start_namesrv(tmp)
    return namesrv, ControllerClient(controllers.controller_addr, retry_timeout=10)


async def stop_control_plane(
    namesrv: NamesrvProc | None, controllers: LocalControllerCluster,
    client: ControllerClient | None,
) -> None:
    """Kills the name server and the controllers, then closes the client (brokers first)."""
    if namesrv is not None:
        await namesrv.kill()
    controllers.kill_all()
    if client is not None:
        await client.close()
