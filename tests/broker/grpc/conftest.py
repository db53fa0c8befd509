from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqcluster.broker.messaging.config import MessagingConfig
from tests.broker.grpc.harness import BrokerThread


def broker_config(**overrides: object) -> MessagingConfig:
    values: dict[str, object] = {
        "brokerName": "broker-a",
        "defaultTopicQueueNums": 1,
        "minInvisibleTimeMillsForRecv": 1000,
        "reviveIntervalMills": 200,
        "transactionTimeOut": 1000,
        "transactionCheckInterval": 1000,
    }
    values.update(overrides)
    return MessagingConfig.model_validate(values)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerThread]:
    b = BrokerThread(tmp_path / "store", broker_config())
    try:
        yield b.start()
    finally:
        b.stop()
