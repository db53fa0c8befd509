"""The brokers' side of a rolling upgrade (mqadmin's calls): commitlog offsets for the
catch-up check and DLedger leadership transfer.

``AdminUpgradeDriver`` also pushes runtime config (``runtime_config_driver``): one
driver, over the brokers' remoting port, for both."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from mqcluster.client import broker_ops
from mqcluster.client.broker_ops import OpsError

from .runtime_config_driver import AdminRuntimeConfigDriver


class UpgradeDriver(Protocol):
    async def max_offsets(self, brokers: Sequence[str]) -> dict[str, int]:
        """Commitlog max offset of each broker that answered, asked in the given order."""
        ...

    async def transfer_leadership(self, leader: str, peer_id: str) -> None:
        """Ask the DLedger leader at ``leader`` to hand over to ``peer_id``; raises
        OpsError when it refuses."""
        ...


@dataclass
class AdminUpgradeDriver(AdminRuntimeConfigDriver):
    """Over the brokers' remoting port (``resolve``: see AdminRuntimeConfigDriver)."""

    async def max_offsets(self, brokers: Sequence[str]) -> dict[str, int]:
        by_local = {self.resolve(b): b for b in brokers}
        try:
            report = await broker_ops.runtime_info(list(by_local))
        except (OpsError, OSError):
            return {}
        out = {}
        for local, table in report.data.items():
            value = table.get("commitLogMaxOffset")
            if value is not None:
                out[by_local[local]] = int(value)
        return out

    async def transfer_leadership(self, leader: str, peer_id: str) -> None:
        report = await broker_ops.dledger_transfer_leadership(self.resolve(leader), peer_id)
        if report.errors:
            raise OpsError("; ".join(report.errors))
