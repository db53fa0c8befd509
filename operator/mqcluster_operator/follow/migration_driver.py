"""The brokers' side of a migration (mqadmin's calls): write permission, consumer lag and
whether every replica holds the leader's topics and subscription groups.

``AdminDriver`` is the follower's one mqadmin driver: a migration's calls, and those of
the epoch checks (``epochs_driver``) and of a scale-down (``scaling_driver``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mqcluster.client import broker_ops
from mqcluster.client.broker_ops import OpsError

from .epochs_driver import AdminEpochsDriver
from .scaling_driver import AdminScalingDriver

READ_ONLY, READ_WRITE = "4", "6"  # RocketMQ's brokerPermission: PERM_READ, PERM_READ|PERM_WRITE


class MigrationDriver(Protocol):
    async def set_writes(self, brokers: Sequence[str], on: bool) -> None:
        """Every broker takes writes (or refuses them); raises when one could not be told."""
        ...

    async def lag(self, broker: str) -> int | None:
        """Messages still to consume on ``broker``; None when it cannot be asked."""
        ...

    async def metadata_behind(self, leader: str, followers: Sequence[str]) -> list[str] | None:
        """The ``followers`` whose topic or subscription-group table differs from the
        leader's; None when one of them (or the leader) cannot be asked."""
        ...


class AdminDriver(AdminEpochsDriver, AdminScalingDriver):
    """Over the brokers' remoting port: ``updateBrokerConfig brokerPermission``, which
    the brokers apply at once and carry to the name servers (producers route away),
    and GET_CONSUME_STATS for every subscription group."""

    async def set_writes(self, brokers: Sequence[str], on: bool) -> None:
        report = await broker_ops.update_broker_config(
            list(brokers), "brokerPermission", READ_WRITE if on else READ_ONLY)
        if report.errors:
            raise OpsError("; ".join(report.errors))

    async def lag(self, broker: str) -> int | None:
        try:
            return await broker_ops.broker_lag(broker)
        except (OpsError, OSError, ValueError, KeyError):
            return None

    async def metadata_behind(self, leader: str, followers: Sequence[str]) -> list[str] | None:
        try:
            want = await broker_ops.metadata_tables(leader)
            behind = []
            for follower in followers:
                if await broker_ops.metadata_tables(follower) != want:
                    behind.append(follower)
            return behind
        except (OpsError, OSError, ValueError, KeyError):
            return None
