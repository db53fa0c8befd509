"""mqadmin subcommands: ask name servers, controllers and brokers; render with admin.format.

Each command returns a :class:`Report` (text, JSON data and per-target errors)
or raises :class:`AdminError` with a one-line message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mqcluster.admin import format as fmt
from mqcluster.client import broker_ops
from mqcluster.client.controller import ControllerClient, ControllerError
from mqcluster.client.namesrv import NamesrvClient, NamesrvError, parse_addrs
from mqcluster.protocol.broker import CreateTopicRequestHeader, encode_update_topic
from mqcluster.protocol.controller import (
    ProtocolError,
)
from mqcluster.protocol.namesrv import ClusterInfo
from mqcluster.wire.frame import ResponseCode
from mqcluster.wire.rpc import RpcClient, RpcError

TIMEOUT = 3.0
CONNECT_TIMEOUT = 1.0


class AdminError(Exception):
    """A command cannot complete; the message is one line for stderr."""


@dataclass
class Report:
    text: str
    data: Any
    errors: list[str] = field(default_factory=list)


def _addrs(value: str, what: str) -> list[str]:
    addrs = parse_addrs(value)
    if not addrs:
        raise AdminError(f"no {what} address given")
    return addrs


async def _cluster_info(namesrv: str) -> ClusterInfo:
    async with NamesrvClient(
        _addrs(namesrv, "name server"), connect_timeout=CONNECT_TIMEOUT, timeout=TIMEOUT
    ) as client:
        try:
            return await client.get_cluster_info()
        except NamesrvError as exc:
            raise AdminError(str(exc)) from exc


def broker_names_of(info: ClusterInfo, cluster: str) -> list[str]:
    if cluster not in info.clusterAddrTable:
        raise AdminError(f"cluster {cluster!r} is not known to the name server")
    return sorted(info.clusterAddrTable[cluster])


# ---------------------------------------------------------------- name server


async def cluster_list(namesrv: str, cluster: str | None) -> Report:
    info = await _cluster_info(namesrv)
    if cluster:
        broker_names_of(info, cluster)
    return Report(fmt.render_cluster_list(info, cluster), fmt.cluster_list_json(info, cluster))


async def topic_list(namesrv: str) -> Report:
    async with NamesrvClient(
        _addrs(namesrv, "name server"), connect_timeout=CONNECT_TIMEOUT, timeout=TIMEOUT
    ) as client:
        try:
            topics = await client.get_topic_list()
        except NamesrvError as exc:
            raise AdminError(str(exc)) from exc
    return Report(fmt.render_topic_list(topics), {"topicList": topics})


async def topic_route(namesrv: str, topic: str) -> Report:
    async with NamesrvClient(
        _addrs(namesrv, "name server"), connect_timeout=CONNECT_TIMEOUT, timeout=TIMEOUT
    ) as client:
        try:
            route = await client.get_route(topic)
        except NamesrvError as exc:
            raise AdminError(str(exc)) from exc
    return Report(fmt.render_topic_route(route), route.model_dump(mode="json"))


async def broker_targets(broker_addr: str | None, cluster: str | None,
                         namesrv: str | None) -> list[str]:
    """``-b brokerAddr`` itself, or every master of ``-c clusterName``."""
    if broker_addr:
        return _addrs(broker_addr, "broker")
    if cluster:
        if not namesrv:
            raise AdminError("-c needs a name server: give -n or set NAMESRV_ADDR")
        info = await _cluster_info(namesrv)
        broker_names_of(info, cluster)
        targets = info.master_addrs(cluster)
        if not targets:
            raise AdminError(f"cluster {cluster!r} has no master broker")
        return targets
    raise AdminError("give -b <brokerAddr> or -c <clusterName>")


async def update_topic(
    header: CreateTopicRequestHeader,
    *,
    broker_addr: str | None,
    cluster: str | None,
    namesrv: str | None,
) -> Report:
    targets = await broker_targets(broker_addr, cluster, namesrv)
    rpc = RpcClient(connect_timeout=CONNECT_TIMEOUT)
    results: list[fmt.UpdateTopicResult] = []
    try:
        for addr in targets:
            error: str | None = None
            try:
                resp = await rpc.invoke(addr, encode_update_topic(header), TIMEOUT)
                if resp.code != ResponseCode.SUCCESS:
                    error = f"code {resp.code}: {resp.remark or 'no remark'}"
            except RpcError as exc:
                error = str(exc)
            results.append(fmt.UpdateTopicResult(addr, header.to_topic_config(), error))
    finally:
        await rpc.close()
    errors = [f"create topic to {r.broker_addr} failed: {r.error}" for r in results if r.error]
    return Report(fmt.render_update_topic(results), fmt.update_topic_json(results), errors)


# ---------------------------------------------------------------- controller


def _controller(addrs: str) -> ControllerClient:
    return ControllerClient(
        _addrs(addrs, "controller"),
        rpc=RpcClient(connect_timeout=CONNECT_TIMEOUT),
        timeout=TIMEOUT,
        retry_timeout=TIMEOUT,
    )


async def _close_controller(client: ControllerClient) -> None:
    await client.rpc.close()


async def _check_reachable(client: ControllerClient) -> None:
    """Fail at once, naming the causes, when no controller answers at all."""
    errors = []
    for addr in client.addrs:
        try:
            await client.rpc.connection(addr)
            return
        except RpcError as exc:
            errors.append(str(exc))
    raise AdminError("no controller reachable: " + "; ".join(errors))


async def get_controller_metadata(controller: str) -> Report:
    client = _controller(controller)
    errors: list[str] = []
    try:
        for addr in client.addrs:
            try:
                m = await client.get_metadata(addr)
            except (RpcError, ControllerError, ProtocolError) as exc:
                errors.append(f"{addr}: {exc}")
                continue
            meta = fmt.ControllerMeta(
                m.group, m.leader_id, m.leader_addr, m.is_leader, m.peers, m.term, addr
            )
            return Report(fmt.render_controller_metadata(meta), fmt.controller_metadata_json(meta))
    finally:
        await _close_controller(client)
    raise AdminError("; ".join(errors))


async def get_sync_state_set(
    controller: str, broker_name: str | None, cluster: str | None, namesrv: str | None
) -> Report:
    if broker_name:
        names = [broker_name]
    elif cluster:
        if not namesrv:
            raise AdminError("-c needs a name server: give -n or set NAMESRV_ADDR")
        names = broker_names_of(await _cluster_info(namesrv), cluster)
    else:
        raise AdminError("give -b <brokerName> or -c <clusterName>")
    client = _controller(controller)
    try:
        await _check_reachable(client)
        replicas = await client.get_sync_state_data(names)
    except (RpcError, ControllerError, ProtocolError) as exc:
        raise AdminError(f"controller: {exc}") from exc
    finally:
        await _close_controller(client)
    found = replicas.replicas_info_table
    missing = [n for n in names if n not in found]
    if broker_name and missing:
        raise AdminError(f"broker group {broker_name!r} is not known to the controller")
    errors = [f"broker group {n!r} is not known to the controller" for n in missing]
    return Report(fmt.render_sync_state_sets(found), fmt.sync_state_sets_json(found), errors)


async def elect_master(controller: str, cluster: str, broker_name: str, broker_id: int) -> Report:
    client = _controller(controller)
    try:
        await _check_reachable(client)
        header, body = await client.elect_master(cluster, broker_name, broker_id, designate=True)
    except (RpcError, ControllerError, ProtocolError) as exc:
        raise AdminError(f"elect master of {broker_name}: {exc}") from exc
    finally:
        await _close_controller(client)
    result = fmt.ElectResult(
        cluster=cluster,
        broker_name=broker_name,
        master_broker_id=header.master_broker_id,
        master_addr=header.master_address,
        master_epoch=header.master_epoch,
        sync_state_set_epoch=header.sync_state_set_epoch,
        sync_state_set=sorted(body.sync_state_set) if body else [],
        broker_addrs=dict(body.broker_member_group.broker_addrs)
        if body and body.broker_member_group
        else {},
    )
    return Report(fmt.render_elect_master(result), fmt.elect_master_json(result))


# ---------------------------------------------------------------- brokers


async def get_broker_epoch(namesrv: str, broker_name: str | None, cluster: str | None) -> Report:
    info = await _cluster_info(namesrv)
    if broker_name:
        if broker_name not in info.brokerAddrTable:
            raise AdminError(f"broker group {broker_name!r} is not known to the name server")
        names = [broker_name]
    elif cluster:
        names = broker_names_of(info, cluster)
    else:
        raise AdminError("give -b <brokerName> or -c <clusterName>")
    targets = [
        addr
        for name in names
        if name in info.brokerAddrTable
        for _, addr in sorted(info.brokerAddrTable[name].brokerAddrs.items())
    ]
    epochs, errors = await fetch_epoch_caches(targets)
    if not epochs and errors:
        raise AdminError("; ".join(errors))
    return Report(fmt.render_broker_epochs(epochs), fmt.broker_epochs_json(epochs), errors)


async def fetch_epoch_caches(addrs: Sequence[str]) -> tuple[list[fmt.BrokerEpoch], list[str]]:
    caches, errors = await broker_ops.epoch_caches(addrs, timeout=TIMEOUT,
                                                   connect_timeout=CONNECT_TIMEOUT)
    return [fmt.BrokerEpoch(addr, cache) for addr, cache in caches], errors
