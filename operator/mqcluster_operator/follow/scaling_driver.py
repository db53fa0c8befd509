"""The brokers' side of a scale-down (mqadmin's calls): stopped replicas cleaned from the
controllers' metadata, then unregistered from the name servers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mqcluster.client.controller import ControllerClient
from mqcluster.client.namesrv import NamesrvClient


class ScalingDriver(Protocol):
    async def retire(self, controllers: Sequence[str], namesrvs: Sequence[str], cluster: str,
                     broker_name: str, broker_ids: Sequence[int],
                     addresses: Sequence[str]) -> None:
        """CleanBrokerData for stopped replicas (raises while the controller refuses),
        then their addresses unregistered from the name servers."""
        ...


class AdminScalingDriver:
    """Over the controllers' and name servers' remoting ports."""

    async def retire(self, controllers: Sequence[str], namesrvs: Sequence[str], cluster: str,
                     broker_name: str, broker_ids: Sequence[int],
                     addresses: Sequence[str]) -> None:
        if broker_ids:
            controller = ControllerClient(list(controllers), timeout=3.0, retry_timeout=3.0)
            try:
                await controller.clean_broker_data(cluster, broker_name, list(broker_ids),
                                                   clean_living_broker=False)
            finally:
                await controller.close()
        if namesrvs:
            client = NamesrvClient(list(namesrvs))
            try:
                for addr, broker_id in zip(addresses, broker_ids, strict=True):
                    if addr:
                        await client.unregister_broker(cluster, broker_name, addr, broker_id)
            finally:
                await client.close()
