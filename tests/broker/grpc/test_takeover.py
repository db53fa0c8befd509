"""Which role changes make a replicated broker restart its consumers' deliveries."""

from __future__ import annotations

from mqcluster.broker.context import ReplicaRole
from mqcluster.broker.grpc.server import takes_over

SLAVE = ReplicaRole(1, False, "10.0.0.1:10911", None, 3)
MASTER = ReplicaRole(0, True, "10.0.0.2:10911", None, 3)


def test_becoming_master_takes_over() -> None:
    assert takes_over(SLAVE, MASTER)


def test_a_master_in_a_new_epoch_takes_over() -> None:
    assert takes_over(MASTER, ReplicaRole(0, True, "10.0.0.2:10911", None, 4))


def test_staying_master_or_becoming_slave_does_not() -> None:
    assert not takes_over(MASTER, ReplicaRole(0, True, "10.0.0.2:10911", "10.0.0.2:8081", 3))
    assert not takes_over(MASTER, SLAVE)
    assert not takes_over(SLAVE, ReplicaRole(2, False, "10.0.0.3:10911", None, 4))
