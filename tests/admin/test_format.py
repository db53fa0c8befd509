from __future__ import annotations

import json

from mqcluster.admin import format as fmt
from mqcluster.protocol.controller import EpochEntryCache, ReplicaIdentity, ReplicasInfo
from mqcluster.protocol.epochs import EpochEntry
from mqcluster.protocol.namesrv import (
    BrokerData,
    ClusterInfo,
    QueueData,
    TopicConfig,
    TopicRouteData,
)


def cluster_info() -> ClusterInfo:
    a = BrokerData(
        cluster="DefaultCluster",
        brokerName="broker-a",
        brokerAddrs={1: "127.0.0.3:10911", 0: "127.0.0.2:10911"},
        haServerAddrs={0: "127.0.0.2:10912"},
        proxyAddrs={0: "127.0.0.2:8081"},
    )
    b = BrokerData(cluster="Other", brokerName="broker-b", brokerAddrs={0: "127.0.0.4:10911"})
    return ClusterInfo(
        brokerAddrTable={"broker-a": a, "broker-b": b},
        clusterAddrTable={"DefaultCluster": ["broker-a"], "Other": ["broker-b"]},
    )


def test_table_aligns_columns_without_trailing_spaces() -> None:
    out = fmt.table(["#A", "#Long header", "#C"], [["x", 1, ""], ["longer cell", 22, "z"]])
    assert out.splitlines() == [
        "#A           #Long header  #C",
        "x            1",
        "longer cell  22            z",
    ]


def test_cluster_list_table() -> None:
    assert fmt.render_cluster_list(cluster_info()).splitlines() == [
        "#Cluster Name   #Broker Name  #BID  #Addr            #HAAddr          #ProxyAddr",
        "DefaultCluster  broker-a      0     127.0.0.2:10911  127.0.0.2:10912  127.0.0.2:8081",
        "DefaultCluster  broker-a      1     127.0.0.3:10911  -                -",
        "Other           broker-b      0     127.0.0.4:10911  -                -",
    ]
    only = fmt.render_cluster_list(cluster_info(), "Other").splitlines()
    assert len(only) == 2 and only[1].startswith("Other")


def test_cluster_list_json_filters_by_cluster() -> None:
    data = fmt.cluster_list_json(cluster_info(), "Other")
    assert data["clusterAddrTable"] == {"Other": ["broker-b"]}
    assert list(data["brokerAddrTable"]) == ["broker-b"]
    assert data["brokerAddrTable"]["broker-b"]["brokerAddrs"] == {"0": "127.0.0.4:10911"}
    json.dumps(data)


def test_topic_route_table() -> None:
    route = TopicRouteData(
        queueDatas=[QueueData(brokerName="broker-a", readQueueNums=4, writeQueueNums=4, perm=6)],
        brokerDatas=[cluster_info().brokerAddrTable["broker-a"]],
    )
    assert fmt.render_topic_route(route).splitlines() == [
        "#ClusterName    #BrokerName  #BID  #BrokerAddr      #ReadQueue  #WriteQueue  #Perm",
        "DefaultCluster  broker-a     0     127.0.0.2:10911  4           4            6(RW-)",
        "DefaultCluster  broker-a     1     127.0.0.3:10911  4           4            6(RW-)",
        "",
        "Total: read queues 4, write queues 4",
    ]


def test_perm_name() -> None:
    assert fmt.perm_name(6) == "RW-"
    assert fmt.perm_name(4) == "R--"
    assert fmt.perm_name(7) == "RWX"


def test_update_topic_render_and_json() -> None:
    cfg = TopicConfig(topicName="T", readQueueNums=2, writeQueueNums=2, order=True)
    results = [
        fmt.UpdateTopicResult("127.0.0.2:10911", cfg),
        fmt.UpdateTopicResult("127.0.0.4:10911", cfg, "code 1: boom"),
    ]
    assert fmt.render_update_topic(results).splitlines() == [
        "create topic to 127.0.0.2:10911 success.",
        "create topic to 127.0.0.4:10911 failed: code 1: boom",
        "TopicConfig [topicName=T, readQueueNums=2, writeQueueNums=2, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=true]",
    ]
    data = fmt.update_topic_json(results)
    assert [r["success"] for r in data["results"]] == [True, False]
    assert data["topicConfig"]["order"] is True


def test_controller_metadata() -> None:
    meta = fmt.ControllerMeta(
        "group1",
        "n1",
        "127.0.0.2:9878",
        False,
        "n0-127.0.0.1:9878;n1-127.0.0.2:9878",
        3,
        "127.0.0.1:9878",
    )
    assert fmt.render_controller_metadata(meta).splitlines() == [
        "#ControllerGroup          group1",
        "#ControllerLeaderId       n1",
        "#ControllerLeaderAddress  127.0.0.2:9878",
        "#Term                     3",
        "#Peer:                    n0:127.0.0.1:9878",
        "#Peer:                    n1:127.0.0.2:9878",
    ]
    data = fmt.controller_metadata_json(meta)
    assert data["peers"] == [
        {"id": "n0", "address": "127.0.0.1:9878"},
        {"id": "n1", "address": "127.0.0.2:9878"},
    ]
    assert data["controllerLeaderAddress"] == "127.0.0.2:9878"


def test_sync_state_set() -> None:
    info = ReplicasInfo(
        master_broker_id=1,
        master_address="127.0.0.2:10911",
        master_epoch=2,
        sync_state_set_epoch=3,
        in_sync_replicas=[ReplicaIdentity("broker-a", 1, "127.0.0.2:10911", True)],
        not_in_sync_replicas=[ReplicaIdentity("broker-a", 2, "127.0.0.3:10911", False)],
    )
    assert fmt.render_sync_state_sets({"broker-a": info}).splitlines() == [
        "#brokerName         broker-a",
        "#MasterBrokerId     1",
        "#MasterAddr         127.0.0.2:10911",
        "#MasterEpoch        2",
        "#SyncStateSetEpoch  3",
        "#SyncStateShowNums  1",
        "",
        "#Replica   #BrokerId  #BrokerAddr      #Alive",
        "InSync     1          127.0.0.2:10911  true",
        "NotInSync  2          127.0.0.3:10911  false",
    ]
    data = fmt.sync_state_sets_json({"broker-a": info})
    assert data["broker-a"]["masterEpoch"] == 2
    assert data["broker-a"]["inSyncReplicas"][0]["brokerId"] == 1


def test_elect_master() -> None:
    r = fmt.ElectResult("c", "broker-a", 2, "127.0.0.3:10911", 4, 5, [2], {1: "x:1", 2: "y:1"})
    lines = fmt.render_elect_master(r).splitlines()
    assert lines[:7] == [
        "#ClusterName        c",
        "#BrokerName         broker-a",
        "#BrokerMasterAddr   127.0.0.3:10911",
        "#BrokerMasterId     2",
        "#MasterEpoch        4",
        "#SyncStateSetEpoch  5",
        "#SyncStateSet       2",
    ]
    assert lines[8:] == ["#BrokerId  #BrokerAddr", "1          x:1", "2          y:1"]
    assert fmt.elect_master_json(r)["brokerAddrs"] == {"1": "x:1", "2": "y:1"}


def test_broker_epoch() -> None:
    cache = EpochEntryCache(
        "DefaultCluster", "broker-a", 1, [EpochEntry(1, 0, 100), EpochEntry(2, 100, -1)], 250
    )
    e = fmt.BrokerEpoch("127.0.0.2:10911", cache)
    assert fmt.render_broker_epochs([e]).splitlines() == [
        "#clusterName  DefaultCluster",
        "#brokerName   broker-a",
        "#brokerAddr   127.0.0.2:10911",
        "#brokerId     1",
        "#maxOffset    250",
        "",
        "#Epoch  #StartOffset  #EndOffset",
        "1       0             100",
        "2       100           -",
    ]
    data = fmt.broker_epochs_json([e])
    assert data[0]["epochList"][1] == {"epoch": 2, "startOffset": 100, "endOffset": -1}
