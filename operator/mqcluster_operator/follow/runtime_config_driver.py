"""The brokers' side of runtime config (mqadmin's ``updateBrokerConfig``): keys the
brokers apply without a restart."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mqcluster.client import broker_ops
from mqcluster.client.broker_ops import OpsError


class RuntimeConfigDriver(Protocol):
    async def update_config(self, brokers: Sequence[str], changes: Mapping[str, str]) -> list[str]:
        """``updateBrokerConfig`` of each key on every broker; the errors (empty: all applied)."""
        ...


def same(address: str) -> str:
    return address


@dataclass
class AdminRuntimeConfigDriver:
    """Over the brokers' remoting port. ``resolve`` maps a pod's DNS address to the one
    to dial (tests run pods on 127.0.0.x)."""

    resolve: Callable[[str], str] = field(default=same)

    async def update_config(self, brokers: Sequence[str], changes: Mapping[str, str]) -> list[str]:
        errors: list[str] = []
        for key, value in sorted(changes.items()):
            try:
                report = await broker_ops.update_broker_config(
                    [self.resolve(b) for b in brokers], key, value)
            except (OpsError, OSError) as exc:
                errors.append(str(exc))
                continue
            errors.extend(report.errors)
        return errors
