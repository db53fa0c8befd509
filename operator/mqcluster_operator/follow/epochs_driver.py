"""The brokers' side of the epoch checks (mqadmin's ``getBrokerEpoch``): the replicas'
epoch entries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mqcluster.client.broker_ops import OpsError, epoch_caches

from .epochs_plan import ReplicaEpochs


class EpochsDriver(Protocol):
    async def epochs(self, brokers: Sequence[str]) -> dict[str, ReplicaEpochs]:
        """The epoch entries of each broker that answers, by address."""
        ...


class AdminEpochsDriver:
    """Over the brokers' remoting port."""

    async def epochs(self, brokers: Sequence[str]) -> dict[str, ReplicaEpochs]:
        """getBrokerEpoch of each broker that answers."""
        try:
            caches, _ = await epoch_caches(list(brokers))
        except (OpsError, OSError, ValueError):
            return {}
        return {addr: ReplicaEpochs(
                    tuple((e.epoch, e.start_offset, e.end_offset) for e in cache.epoch_list),
                    cache.max_offset)
                for addr, cache in caches}
