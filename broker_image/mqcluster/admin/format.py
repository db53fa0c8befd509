"""Pure rendering of mqadmin results: aligned tables as RocketMQ prints them, and JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mqcluster.protocol.controller import EpochEntryCache, ReplicasInfo
from mqcluster.protocol.namesrv import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    ClusterInfo,
    TopicConfig,
    TopicRouteData,
)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], gap: int = 2) -> str:
    """Left-aligned columns, each as wide as its widest cell; no trailing spaces."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for r in cells:
        padded = [c.ljust(w + gap) for c, w in zip(r[:-1], widths[:-1], strict=True)]
        lines.append(("".join(padded) + r[-1]).rstrip())
    return "\n".join(lines)


def key_values(pairs: Sequence[tuple[str, object]]) -> str:
    """``#key  value`` lines with the values aligned."""
    width = max((len(k) for k, _ in pairs), default=0)
    return "\n".join(f"{k.ljust(width)}  {'' if v is None else v}".rstrip() for k, v in pairs)


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True)


def perm_name(perm: int) -> str:
    """RocketMQ's PermName.perm2String: ``RW-`` style, X for inherit."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )


# ---------------------------------------------------------------- name server


def render_cluster_list(info: ClusterInfo, cluster: str | None = None) -> str:
    rows: list[list[object]] = []
    for cname in sorted(info.clusterAddrTable):
        if cluster and cname != cluster:
            continue
        for bname in sorted(info.clusterAddrTable[cname]):
            data = info.brokerAddrTable.get(bname)
            if data is None:
                continue
            for bid in sorted(data.brokerAddrs):
                rows.append(
                    [
                        cname,
                        bname,
                        bid,
                        data.brokerAddrs[bid],
                        data.haServerAddrs.get(bid) or "-",
                        data.proxyAddrs.get(bid) or "-",
                    ]
                )
    headers = ["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#HAAddr", "#ProxyAddr"]
    return table(headers, rows)


def cluster_list_json(info: ClusterInfo, cluster: str | None = None) -> Any:
    data = info.model_dump(mode="json")
    if cluster:
        names = set(info.clusterAddrTable.get(cluster, []))
        data["clusterAddrTable"] = {cluster: sorted(names)}
        data["brokerAddrTable"] = {k: v for k, v in data["brokerAddrTable"].items() if k in names}
    return data


def render_topic_route(route: TopicRouteData) -> str:
    queues = {q.brokerName: q for q in route.queueDatas}
    rows: list[list[object]] = []
    for data in sorted(route.brokerDatas, key=lambda d: d.brokerName):
        q = queues.get(data.brokerName)
        for bid in sorted(data.brokerAddrs):
            rows.append(
                [
                    data.cluster,
                    data.brokerName,
                    bid,
                    data.brokerAddrs[bid],
                    q.readQueueNums if q else "-",
                    q.writeQueueNums if q else "-",
                    f"{q.perm}({perm_name(q.perm)})" if q else "-",
                ]
            )
    headers = [
        "#ClusterName",
        "#BrokerName",
        "#BID",
        "#BrokerAddr",
        "#ReadQueue",
        "#WriteQueue",
        "#Perm",
    ]
    total_r = sum(q.readQueueNums for q in route.queueDatas)
    total_w = sum(q.writeQueueNums for q in route.queueDatas)
    return table(headers, rows) + f"\n\nTotal: read queues {total_r}, write queues {total_w}"


def render_topic_list(topics: Sequence[str]) -> str:
    return "\n".join(topics)


@dataclass(frozen=True)
class UpdateTopicResult:
    broker_addr: str
    config: TopicConfig
    error: str | None = None


def render_update_topic(results: Sequence[UpdateTopicResult]) -> str:
    lines = []
    for r in results:
        if r.error is None:
            lines.append(f"create topic to {r.broker_addr} success.")
        else:
            lines.append(f"create topic to {r.broker_addr} failed: {r.error}")
    if results:
        c = results[0].config
        lines.append(
            f"TopicConfig [topicName={c.topicName}, readQueueNums={c.readQueueNums}, "
            f"writeQueueNums={c.writeQueueNums}, perm={perm_name(c.perm)}, "
            f"topicFilterType={c.topicFilterType}, topicSysFlag={c.topicSysFlag}, "
            f"order={str(c.order).lower()}]"
        )
    return "\n".join(lines)


def update_topic_json(results: Sequence[UpdateTopicResult]) -> Any:
    return {
        "topicConfig": results[0].config.model_dump(mode="json") if results else None,
        "results": [
            {"brokerAddr": r.broker_addr, "success": r.error is None, "error": r.error}
            for r in results
        ],
    }


# ---------------------------------------------------------------- controller


@dataclass(frozen=True)
class ControllerMeta:
    """GetControllerMetaData as mqadmin shows it."""

    group: str
    leader_id: str | None
    leader_addr: str | None
    is_leader: bool
    peers: str
    term: int
    queried_addr: str


def controller_peers(peers: str) -> list[tuple[str, str]]:
    """``n0-host:port;n1-host:port`` -> ``[("n0", "host:port"), ...]``."""
    out = []
    for part in peers.split(";"):
        part = part.strip()
        if not part:
            continue
        pid, sep, addr = part.partition("-")
        out.append((pid, addr) if sep else ("", pid))
    return out


def render_controller_metadata(meta: ControllerMeta) -> str:
    pairs: list[tuple[str, object]] = [
        ("#ControllerGroup", meta.group),
        ("#ControllerLeaderId", meta.leader_id or "-"),
        ("#ControllerLeaderAddress", meta.leader_addr or "-"),
        ("#Term", meta.term),
    ]
    pairs += [
        ("#Peer:", f"{pid}:{addr}" if pid else addr) for pid, addr in controller_peers(meta.peers)
    ]
    return key_values(pairs)


def controller_metadata_json(meta: ControllerMeta) -> Any:
    return {
        "group": meta.group,
        "controllerLeaderId": meta.leader_id,
        "controllerLeaderAddress": meta.leader_addr,
        "isLeader": meta.is_leader,
        "term": meta.term,
        "peers": [{"id": pid, "address": addr} for pid, addr in controller_peers(meta.peers)],
        "queriedAddress": meta.queried_addr,
    }


def render_sync_state_set(broker_name: str, info: ReplicasInfo) -> str:
    head = key_values(
        [
            ("#brokerName", broker_name),
            (
                "#MasterBrokerId",
                info.master_broker_id if info.master_broker_id is not None else "-",
            ),
            ("#MasterAddr", info.master_address or "-"),
            ("#MasterEpoch", info.master_epoch),
            ("#SyncStateSetEpoch", info.sync_state_set_epoch),
            ("#SyncStateShowNums", len(info.in_sync_replicas)),
        ]
    )
    rows: list[list[object]] = [
        ["InSync", r.broker_id, r.broker_address, str(r.alive).lower()]
        for r in sorted(info.in_sync_replicas, key=lambda r: r.broker_id)
    ]
    rows += [
        ["NotInSync", r.broker_id, r.broker_address, str(r.alive).lower()]
        for r in sorted(info.not_in_sync_replicas, key=lambda r: r.broker_id)
    ]
    return head + "\n\n" + table(["#Replica", "#BrokerId", "#BrokerAddr", "#Alive"], rows)


def render_sync_state_sets(table_: dict[str, ReplicasInfo]) -> str:
    return "\n\n".join(render_sync_state_set(n, table_[n]) for n in sorted(table_))


def sync_state_sets_json(table_: dict[str, ReplicasInfo]) -> Any:
    return {name: table_[name].to_json() for name in sorted(table_)}


@dataclass(frozen=True)
class ElectResult:
    cluster: str
    broker_name: str
    master_broker_id: int | None
    master_addr: str | None
    master_epoch: int | None
    sync_state_set_epoch: int | None
    sync_state_set: Sequence[int]
    broker_addrs: dict[int, str]


def render_elect_master(r: ElectResult) -> str:
    head = key_values(
        [
            ("#ClusterName", r.cluster),
            ("#BrokerName", r.broker_name),
            ("#BrokerMasterAddr", r.master_addr or "-"),
            ("#BrokerMasterId", r.master_broker_id if r.master_broker_id is not None else "-"),
            ("#MasterEpoch", r.master_epoch if r.master_epoch is not None else "-"),
            (
                "#SyncStateSetEpoch",
                r.sync_state_set_epoch if r.sync_state_set_epoch is not None else "-",
            ),
            ("#SyncStateSet", ",".join(str(i) for i in sorted(r.sync_state_set)) or "-"),
        ]
    )
    if not r.broker_addrs:
        return head
    rows = [[bid, r.broker_addrs[bid]] for bid in sorted(r.broker_addrs)]
    return head + "\n\n" + table(["#BrokerId", "#BrokerAddr"], rows)


def elect_master_json(r: ElectResult) -> Any:
    return {
        "clusterName": r.cluster,
        "brokerName": r.broker_name,
        "masterBrokerId": r.master_broker_id,
        "masterAddress": r.master_addr,
        "masterEpoch": r.master_epoch,
        "syncStateSetEpoch": r.sync_state_set_epoch,
        "syncStateSet": sorted(r.sync_state_set),
        "brokerAddrs": {str(k): v for k, v in sorted(r.broker_addrs.items())},
    }


# ---------------------------------------------------------------- broker epochs


@dataclass(frozen=True)
class BrokerEpoch:
    broker_addr: str
    cache: EpochEntryCache


def render_broker_epoch(e: BrokerEpoch) -> str:
    c = e.cache
    head = key_values(
        [
            ("#clusterName", c.cluster_name),
            ("#brokerName", c.broker_name),
            ("#brokerAddr", e.broker_addr),
            ("#brokerId", c.broker_id),
            ("#maxOffset", c.max_offset),
        ]
    )
    rows = [
        [x.epoch, x.start_offset, "-" if x.end_offset < 0 else x.end_offset] for x in c.epoch_list
    ]
    return head + "\n\n" + table(["#Epoch", "#StartOffset", "#EndOffset"], rows)


def render_broker_epochs(epochs: Sequence[BrokerEpoch]) -> str:
    return "\n\n".join(render_broker_epoch(e) for e in epochs)


def broker_epochs_json(epochs: Sequence[BrokerEpoch]) -> Any:
    out = []
    for e in epochs:
        c = e.cache
        out.append(
            {
                "clusterName": c.cluster_name,
                "brokerName": c.broker_name,
                "brokerAddr": e.broker_addr,
                "brokerId": c.broker_id,
                "maxOffset": c.max_offset,
                "epochList": [x.to_json() for x in c.epoch_list],
            }
        )
    return out
