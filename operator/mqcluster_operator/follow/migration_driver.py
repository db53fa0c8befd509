"""The brokers' side of the operator's procedures (mqadmin's calls): for a migration,
write permission, consumer lag and whether every replica holds the leader's topics and
subscription groups; for every controller-mode group, the replicas' epoch entries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mqcluster.admin import ops
from mqcluster.admin.commands import AdminError, fetch_epoch_caches
from mqcluster.namesrv.client import NamesrvClient

from .epochs_plan import ReplicaEpochs

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

    async def epochs(self, brokers: Sequence[str]) -> dict[str, ReplicaEpochs]:
        """The epoch entries of each broker that answers, by address."""
        ...

    async def retire(self, controllers: Sequence[str], namesrvs: Sequence[str], cluster: str,
                     broker_name: str, broker_ids: Sequence[int],
                     addresses: Sequence[str]) -> None:
        """CleanBrokerData for stopped replicas (raises while the controller refuses),
        then their addresses unregistered from the name servers."""
        ...


class AdminDriver:
    """Over the brokers' remoting port: ``updateBrokerConfig brokerPermission``, which
    the brokers apply at once and carry to the name servers (producers route away),
    and GET_CONSUME_STATS for every subscription group."""

    async def set_writes(self, brokers: Sequence[str], on: bool) -> None:
        report = await ops.update_broker_config(
            list(brokers), "brokerPermission", READ_WRITE if on else READ_ONLY)
        if report.errors:
            raise AdminError("; ".join(report.errors))

    async def lag(self, broker: str) -> int | None:
        try:
            return await ops.broker_lag(broker)
        except (AdminError, OSError, ValueError, KeyError):
            return None

    async def metadata_behind(self, leader: str, followers: Sequence[str]) -> list[str] | None:
        try:
            want = await ops.metadata_tables(leader)
            behind = []
            for follower in followers:
                if await ops.metadata_tables(follower) != want:
                    behind.append(follower)
            return behind
        except (AdminError, OSError, ValueError, KeyError):
            return None

    async def epochs(self, brokers: Sequence[str]) -> dict[str, ReplicaEpochs]:
        """getBrokerEpoch of each broker that answers."""
        try:
            caches, _ = await fetch_epoch_caches(list(brokers))
        except (AdminError, OSError, ValueError):
            return {}
        return {c.broker_addr: ReplicaEpochs(
                    tuple((e.epoch, e.start_offset, e.end_offset) for e in c.cache.epoch_list),
                    c.cache.max_offset)
                for c in caches}

    async def retire(self, controllers: Sequence[str], namesrvs: Sequence[str], cluster: str,
                     broker_name: str, broker_ids: Sequence[int],
                     addresses: Sequence[str]) -> None:
        if broker_ids:
            await ops.clean_broker_metadata(";".join(controllers), cluster, broker_name,
                                            ";".join(str(i) for i in broker_ids), False)
        if namesrvs:
            client = NamesrvClient(list(namesrvs))
            try:
                for addr, broker_id in zip(addresses, broker_ids, strict=True):
                    if addr:
                        await client.unregister_broker(cluster, broker_name, addr, broker_id)
            finally:
                await client.close()
