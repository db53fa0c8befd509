from __future__ import annotations

import json
import os
from pathlib import Path

from mqcluster.common.files import atomic_write
from mqcluster.store import (
    ConsumerOffsetManager,
    SubscriptionGroupConfig,
    SubscriptionGroupManager,
    TopicConfig,
    TopicConfigManager,
)

from .conftest import StoreFactory, rec


def test_topics_json_shape_and_reload(tmp_path: Path) -> None:
    topics = TopicConfigManager(str(tmp_path), clock=lambda: 12.5)
    topics.put(TopicConfig("orders", readQueueNums=8, writeQueueNums=4, order=True))
    topics.create_if_absent("events")
    data = json.loads((tmp_path / "topics.json").read_text())
    assert data["topicConfigTable"]["orders"] == {
        "topicName": "orders", "readQueueNums": 8, "writeQueueNums": 4, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": True, "attributes": {}}
    assert data["dataVersion"] == {"counter": 2, "timestamp": 12500}
    again = TopicConfigManager(str(tmp_path))
    assert again.load()
    assert again.get("orders") == topics.get("orders")
    events = again.get("events")
    assert events is not None and events.readQueueNums == 4
    assert sorted(os.listdir(tmp_path)) == ["topics.json", "topics.json.bak"]


def test_damaged_file_falls_back_to_backup(tmp_path: Path) -> None:
    groups = SubscriptionGroupManager(str(tmp_path))
    groups.put(SubscriptionGroupConfig("g1", retryMaxTimes=3))
    groups.put(SubscriptionGroupConfig("g2"))
    (tmp_path / "subscriptionGroup.json").write_text('{"subscriptionGroupTable": {"g1"')
    again = SubscriptionGroupManager(str(tmp_path))
    assert again.load()
    g1 = again.get("g1")
    assert g1 is not None and g1.retryMaxTimes == 3
    assert again.get("g2") is None


def test_atomic_write_leaves_old_or_new(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    atomic_write(str(path), b"old")
    (tmp_path / "f.json.tmp").write_bytes(b"half-writ")
    atomic_write(str(path), b"new")
    assert path.read_bytes() == b"new"
    assert not (tmp_path / "f.json.tmp").exists()


def test_consumer_offsets_shape(tmp_path: Path) -> None:
    offsets = ConsumerOffsetManager(str(tmp_path))
    offsets.commit("g", "T", 0, 5)
    offsets.commit("g", "T", 1, 7)
    offsets.persist()
    data = json.loads((tmp_path / "consumerOffset.json").read_text())
    assert data == {"offsetTable": {"T@g": {"0": 5, "1": 7}}}
    again = ConsumerOffsetManager(str(tmp_path))
    again.load()
    assert again.query("g", "T", 1) == 7 and again.query("g", "T", 2) == -1
    assert again.groups_of_topic("T") == {"g"}


async def test_store_persists_metadata_across_restart(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    store.topics.put(TopicConfig("T", 2, 2))
    store.subscriptions.create_if_absent("g")
    await store.put_message(rec(0))
    store.offsets.commit("g", "T", 0, 1)
    await store.shutdown()
    config_dir = Path(store.config.config_dir)
    assert {"topics.json", "subscriptionGroup.json", "consumerOffset.json"} <= set(
        os.listdir(config_dir))
    again = store_factory()
    await again.start()
    assert again.topics.get("T") == TopicConfig("T", 2, 2)
    assert again.subscriptions.get("g") is not None
    assert again.offsets.query("g", "T", 0) == 1
