from __future__ import annotations

from pathlib import Path

import pytest

from mqcluster.broker.config import (
    BrokerConfig,
    BrokerRole,
    FlushDiskType,
    _local_ip,
    load_broker_config,
    parse_dledger_peers,
)
from mqcluster.common.config import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "broker.conf"
    p.write_text(text)
    return p


def test_defaults_follow_rocketmq() -> None:
    cfg = BrokerConfig(brokerName="broker-a")
    assert cfg.brokerClusterName == "DefaultCluster"
    assert cfg.listenPort == 10911
    assert cfg.grpcServerPort == 8081
    assert cfg.maxMessageSize == 4 * 1024 * 1024
    assert cfg.brokerRole is BrokerRole.ASYNC_MASTER
    assert cfg.flushDiskType is FlushDiskType.ASYNC_FLUSH
    assert cfg.autoCreateTopicEnable is True
    assert cfg.inSyncReplicas == 1 and cfg.minInSyncReplicas == 1


def test_file_with_rocketmq_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "brokerClusterName = c1\n"
        "brokerName=broker-b\n"
        "brokerId=1\n"
        "brokerRole=SLAVE\n"
        "namesrvAddr=127.0.0.1:9876;127.0.0.2:9876\n"
        "flushDiskType=SYNC_FLUSH\n"
        "storePathRootDir=/tmp/x\n"
        "autoCreateTopicEnable=false\n",
    )
    cfg = load_broker_config(path)
    assert cfg.brokerRole is BrokerRole.SLAVE and cfg.brokerId == 1
    assert cfg.namesrv_addrs == ["127.0.0.1:9876", "127.0.0.2:9876"]
    assert cfg.flushDiskType is FlushDiskType.SYNC_FLUSH
    assert str(cfg.commitlog_dir) == "/tmp/x/commitlog"
    assert cfg.autoCreateTopicEnable is False


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("listenPort", "0"),
        ("listenPort", "65536"),
        ("grpcServerPort", "abc"),
        ("metricsPromExporterPort", "-1"),
        ("brokerRole", "MASTER"),
        ("flushDiskType", "SOMETIMES"),
        ("maxMessageSize", "0"),
        ("mappedFileSizeCommitLog", "-5"),
        ("diskMaxUsedSpaceRatio", "99"),
        ("namesrvAddr", "localhost"),
        ("namesrvAddr", "a:9876;b:99999"),
        ("dLegerPeers", "n0:127.0.0.1"),
        ("defaultTopicQueueNums", "0"),
        ("autoCreateTopicEnable", "perhaps"),
    ],
)
def test_bad_single_values_name_the_key(tmp_path: Path, key: str, value: str) -> None:
    path = write(tmp_path, f"brokerName=b\n{key}={value}\n")
    with pytest.raises(ConfigError) as err:
        load_broker_config(path)
    assert repr(key) in str(err.value)
    assert str(path) in str(err.value)


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"brokerRole": "SLAVE"}, "brokerId"),
        ({"brokerRole": "SYNC_MASTER", "brokerId": "2"}, "brokerId"),
        ({"enableControllerMode": "true"}, "controllerAddr"),
        ({"enableDLegerCommitLog": "true", "dLegerPeers": "n0-127.0.0.1:40911"}, "dLegerGroup"),
        (
            {
                "enableDLegerCommitLog": "true",
                "dLegerGroup": "g",
                "dLegerPeers": "n0-127.0.0.1:40911;n1-127.0.0.1:40912",
                "dLegerSelfId": "n7",
            },
            "dLegerSelfId",
        ),
        (
            {"enableDLegerCommitLog": "true", "enableControllerMode": "true"},
            "enableDLegerCommitLog",
        ),
        ({"inSyncReplicas": "1", "minInSyncReplicas": "2"}, "minInSyncReplicas"),
        ({"maxMessageSize": "2048", "mappedFileSizeCommitLog": "1024"}, "mappedFileSizeCommitLog"),
        ({"listenPort": "9000", "grpcServerPort": "9000"}, "grpcServerPort"),
        ({"listenPort": "9000", "metricsPromExporterPort": "9000"}, "metricsPromExporterPort"),
    ],
)
def test_cross_field_rules_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_broker_config(None, {"brokerName": "b", **props})
    assert f"key {key!r}" in str(err.value)


def test_controller_and_dledger_modes_accepted() -> None:
    ctl = load_broker_config(
        None,
        {
            "brokerName": "b",
            "enableControllerMode": "true",
            "controllerAddr": "127.0.0.1:9877;127.0.0.1:9878",
            "allAckInSyncStateSet": "true",
            "brokerId": "3",
        },
    )
    assert ctl.controller_addrs == ["127.0.0.1:9877", "127.0.0.1:9878"]
    dl = load_broker_config(
        None,
        {
            "brokerName": "b",
            "enableDLegerCommitLog": "true",
            "dLegerGroup": "g",
            "dLegerPeers": "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913",
            "dLegerSelfId": "n1",
        },
    )
    assert dl.dledger_peers["n1"] == "127.0.0.1:40912"


def test_parse_dledger_peers_rejects_duplicates() -> None:
    with pytest.raises(ValueError, match="twice"):
        parse_dledger_peers("n0-a:1;n0-b:2")


def test_disabled_endpoints_do_not_clash() -> None:
    cfg = load_broker_config(
        None,
        {
            "brokerName": "b",
            "listenPort": "9000",
            "grpcServerPort": "9000",
            "enableProxy": "false",
            "metricsExporterType": "DISABLE",
            "metricsPromExporterPort": "9000",
        },
    )
    assert not cfg.enableProxy and not cfg.metrics_enabled


def test_routes_name_the_hosts_address_unless_broker_ip1_is_set() -> None:
    bound_only = BrokerConfig(brokerName="b", bindAddress="127.0.0.5")
    assert bound_only.advertised_ip == _local_ip(), "bindAddress is not what routes name"
    assert bound_only.broker_addr == f"{_local_ip()}:10911"
    pinned = BrokerConfig(brokerName="b", bindAddress="0.0.0.0", brokerIP1="127.0.0.1")
    assert pinned.broker_addr == "127.0.0.1:10911"


def test_dledger_peers_named_by_pod_dns_keep_their_ids() -> None:
    # the id ends at the first "-", as DLedger reads it (a Kubernetes pod name has "-" too)
    peers = "n0-b-0.b-headless.mq.svc:40911;n1-b-1.b-headless.mq.svc:40911"
    assert parse_dledger_peers(peers) == {
        "n0": "b-0.b-headless.mq.svc:40911", "n1": "b-1.b-headless.mq.svc:40911"}
    cfg = load_broker_config(None, {"brokerName": "b", "enableDLegerCommitLog": "true",
                                    "dLegerGroup": "b", "dLegerPeers": peers,
                                    "dLegerSelfId": "n1"})
    assert cfg.dledger_peers["n1"] == "b-1.b-headless.mq.svc:40911"


def test_a_misspelt_durability_key_is_not_silently_left_false(tmp_path: Path) -> None:
    path = write(tmp_path, "brokerName=b\nenableControllerMode=true\n"
                           "controllerAddr=127.0.0.1:9877\nallAckInSyncStatSet=true\n")
    with pytest.raises(ConfigError, match="unknown key 'allAckInSyncStatSet' on line 4: "
                                          "did you mean 'allAckInSyncStateSet'"):
        load_broker_config(path)


@pytest.mark.parametrize("key", ["brokerName", "brokerClusterName", "storePathRootDir",
                                 "dLegerGroup", "dLegerSelfId"])
def test_an_empty_name_does_not_fall_back_to_a_default(tmp_path: Path, key: str) -> None:
    path = write(tmp_path, "brokerName=\n" if key == "brokerName" else f"brokerName=b\n{key}=\n")
    with pytest.raises(ConfigError, match=f"key '{key}' on line \\d is empty"):
        load_broker_config(path)


def test_a_key_set_twice_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "brokerName=b\nbrokerRole=SLAVE\nbrokerId=1\nbrokerRole=SYNC_MASTER\n")
    with pytest.raises(ConfigError, match=r"'brokerRole' is set more than once \(lines 2, 4\)"):
        load_broker_config(path)


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    "name", sorted(p.name for p in [*EXAMPLES.glob("broker*.conf"), *EXAMPLES.glob("conf/*.conf")]))
def test_example_broker_files_load_without_a_warning(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = next(p for p in [*EXAMPLES.glob("*.conf"), *EXAMPLES.glob("conf/*.conf")]
                if p.name == name)
    load_broker_config(path)
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
