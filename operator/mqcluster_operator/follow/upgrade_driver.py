"""The brokers' side of a rolling upgrade (mqadmin's calls): commitlog offsets for the
catch-up check, DLedger leadership transfer, and config keys applied without a restart."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mqcluster.admin import ops
from mqcluster.admin.commands import AdminError


class UpgradeDriver(Protocol):
    async def max_offsets(self, brokers: Sequence[str]) -> dict[str, int]:
        """Commitlog max offset of each broker that answered, asked in the given order."""
        ...

    async def transfer_leadership(self, leader: str, peer_id: str) -> None:
        """Ask the DLedger leader at ``leader`` to hand over to ``peer_id``; raises
        AdminError when it refuses."""
        ...

    async def update_config(self, brokers: Sequence[str], changes: Mapping[str, str]) -> list[str]:
        """``updateBrokerConfig`` of each key on every broker; the errors (empty: all applied)."""
        ...


def _same(address: str) -> str:
    return address


@dataclass
class AdminUpgradeDriver:
    """Over the brokers' remoting port. ``resolve`` maps a pod's DNS address to the one
    to dial (tests run pods on 127.0.0.x)."""

    resolve: Callable[[str], str] = field(default=_same)

    async def max_offsets(self, brokers: Sequence[str]) -> dict[str, int]:
        by_local = {self.resolve(b): b for b in brokers}
        try:
            report = await ops.broker_status(list(by_local))
        except (AdminError, OSError):
            return {}
        out = {}
        for local, table in report.data.items():
            value = table.get("commitLogMaxOffset")
            if value is not None:
                out[by_local[local]] = int(value)
        return out

    async def transfer_leadership(self, leader: str, peer_id: str) -> None:
        report = await ops.dledger_transfer_leadership(self.resolve(leader), peer_id)
        if report.errors:
            raise AdminError("; ".join(report.errors))

    async def update_config(self, brokers: Sequence[str], changes: Mapping[str, str]) -> list[str]:
        errors: list[str] = []
        for key, value in sorted(changes.items()):
            try:
                report = await ops.update_broker_config(
                    [self.resolve(b) for b in brokers], key, value)
            except (AdminError, OSError) as exc:
                errors.append(str(exc))
                continue
            errors.extend(report.errors)
        return errors
