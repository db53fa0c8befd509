"""``mqadmin`` as a subprocess against a real ``mqnamesrv`` and broker stand-ins."""

from __future__ import annotations

import json

from mqcluster.client.namesrv import NamesrvClient
from mqcluster_testing.namesrv.standin import StandInBroker
from mqcluster_testing.procs import Procs, free_addr, procs  # noqa: F401
from tests.namesrv.helpers import mqadmin, start_namesrv


def host_of(addr: str) -> str:
    return addr.rsplit(":", 1)[0]


def one_error_line(rc: int, out: str, err: str) -> str:
    assert rc == 1, (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


async def test_namesrv_commands_table_and_json(procs: Procs) -> None:  # noqa: F811
    _, ns = await start_namesrv(procs)
    master = StandInBroker([ns], host=host_of(free_addr()))
    slave = StandInBroker([ns], host=host_of(free_addr()), broker_id=1)
    await master.start()
    await slave.start()
    try:
        rc, out, err = await mqadmin("clusterList", "-n", ns)
        assert rc == 0, err
        lines = out.splitlines()
        assert lines[0].split() == [
            "#Cluster",
            "Name",
            "#Broker",
            "Name",
            "#BID",
            "#Addr",
            "#HAAddr",
            "#ProxyAddr",
        ]
        assert lines[1].split()[:4] == ["DefaultCluster", "broker-a", "0", master.addr]
        assert lines[2].split()[:4] == ["DefaultCluster", "broker-a", "1", slave.addr]

        rc, out, _ = await mqadmin("clusterList", "-n", ns, "--json")
        assert rc == 0
        data = json.loads(out)
        assert data["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {
            "0": master.addr,
            "1": slave.addr,
        }

        rc, out, _ = await mqadmin("topicRoute", "-n", ns, "-t", "TopicTest")
        assert rc == 0
        assert out.splitlines()[1].split() == [
            "DefaultCluster",
            "broker-a",
            "0",
            master.addr,
            "4",
            "4",
            "6(RW-)",
        ]
        rc, out, _ = await mqadmin("topicRoute", "-n", ns, "-t", "TopicTest", "--json")
        assert json.loads(out)["queueDatas"][0]["readQueueNums"] == 4

        rounds = master.registrar.rounds
        rc, out, err = await mqadmin(
            "updateTopic",
            "-n",
            ns,
            "-c",
            "DefaultCluster",
            "-t",
            "NewTopic",
            "-r",
            "2",
            "-w",
            "2",
            "-o",
            "true",
        )
        assert rc == 0, err
        assert out.splitlines()[0] == f"create topic to {master.addr} success."
        assert [(c.topicName, c.readQueueNums, c.order) for c in master.updates] == [
            ("NewTopic", 2, True)
        ]
        assert slave.updates == []
        await master.registrar.wait_rounds(rounds + 1)

        rc, out, _ = await mqadmin("topicList", "-n", ns)
        assert out.split() == ["NewTopic", "TopicTest"]
        rc, out, _ = await mqadmin("topicList", "-n", ns, "--json")
        assert json.loads(out) == {"topicList": ["NewTopic", "TopicTest"]}

        rc, out, err = await mqadmin("getBrokerEpoch", "-n", ns, "-b", "broker-a")
        assert rc == 0, err
        assert f"#brokerAddr   {master.addr}" in out and f"#brokerAddr   {slave.addr}" in out
        assert "2       100           -" in out
        rc, out, _ = await mqadmin("getBrokerEpoch", "-n", ns, "-c", "DefaultCluster", "--json")
        data = json.loads(out)
        assert [(d["brokerAddr"], d["brokerId"]) for d in data] == [
            (master.addr, 0),
            (slave.addr, 1),
        ]
    finally:
        await master.stop()
        await slave.stop()


async def test_error_paths_are_one_line(procs: Procs) -> None:  # noqa: F811
    _, ns = await start_namesrv(procs)
    dead = free_addr()
    line = one_error_line(*await mqadmin("clusterList", "-n", dead))
    assert line.startswith("mqadmin clusterList: ") and dead in line
    line = one_error_line(*await mqadmin("getControllerMetaData", "-a", dead))
    assert dead in line
    line = one_error_line(*await mqadmin("getSyncStateSet", "-a", dead, "-b", "broker-a"))
    assert "no controller reachable" in line
    line = one_error_line(
        *await mqadmin("electMaster", "-a", dead, "-c", "c", "-bn", "broker-a", "-b", "1")
    )
    assert dead in line
    rc, out, err = await mqadmin("updateTopic", "-b", dead, "-t", "T")
    assert rc == 1 and "failed" in out
    assert len(err.strip().splitlines()) == 1 and dead in err

    line = one_error_line(*await mqadmin("topicRoute", "-n", ns, "-t", "Nope"))
    assert "'Nope' does not exist" in line
    line = one_error_line(*await mqadmin("getBrokerEpoch", "-n", ns, "-b", "no-such-group"))
    assert "'no-such-group' is not known" in line
    line = one_error_line(*await mqadmin("clusterList", "-n", ns, "-c", "NoCluster"))
    assert "'NoCluster' is not known" in line
    line = one_error_line(*await mqadmin("updateTopic", "-n", ns, "-c", "NoCluster", "-t", "T"))
    assert "'NoCluster' is not known" in line

    rc, _, err = await mqadmin("getBrokerEpoch", "-b", "x", "-c", "y", "-n", ns)
    assert rc == 2 and "not allowed with" in err

    async with NamesrvClient([ns]) as client:
        assert await client.get_topic_list() == []
