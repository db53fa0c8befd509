from __future__ import annotations

from pathlib import Path

import pytest

from mqcluster.broker.messaging.clock import ManualClock
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.broker.messaging.service import MessagingService
from mqcluster.store.topic_config import TopicConfig
from tests.broker.messaging.memory_log import MemoryLog


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def mlog(tmp_path: Path, clock: ManualClock) -> MemoryLog:
    log = MemoryLog(str(tmp_path), clock.now_ms)
    log.topics.put(TopicConfig("T", 1, 1))
    log.topics.put(TopicConfig("T2", 2, 2))
    return log


@pytest.fixture
def config() -> MessagingConfig:
    return MessagingConfig(brokerName="broker-a", minInvisibleTimeMillsForRecv=1000)


@pytest.fixture
def svc(mlog: MemoryLog, config: MessagingConfig, clock: ManualClock) -> MessagingService:
    s = MessagingService(mlog, config, clock=clock)
    s.load()
    return s
