"""ReplicaHosts: which hosts a controller-mode master takes which slave from."""

from __future__ import annotations

from mqcluster.ha.replica_hosts import ReplicaHosts


class Table:
    def __init__(self, table: dict[int, str]) -> None:
        self.table = table
        self.reads = 0
        self.fail = False

    async def __call__(self) -> dict[int, str]:
        self.reads += 1
        if self.fail:
            raise OSError("controller unreachable")
        return dict(self.table)


async def test_only_registered_replicas_from_their_hosts() -> None:
    table = Table({2: "127.0.0.21:10911", 3: "localhost:10911"})
    gate = ReplicaHosts(table)
    assert gate.refusal(2, "127.0.0.21") == "the group's replicas are not known yet"
    await gate.refresh()
    assert gate.refusal(2, "127.0.0.21") is None
    assert gate.refusal(3, "127.0.0.1") is None  # a name, resolved
    assert gate.refusal(2, "127.0.0.99") == (
        "broker id 2 is registered at 127.0.0.21, not 127.0.0.99")
    assert gate.refusal(7, "127.0.0.21") == (
        "broker id 7 is not a registered replica of this group")
    assert gate.refusal(2, None) is not None


async def test_a_refusal_reads_the_table_again_at_most_once_a_second() -> None:
    now = [0.0]
    table = Table({2: "127.0.0.21:10911"})
    gate = ReplicaHosts(table, clock=lambda: now[0])
    await gate.refresh()
    table.table[4] = "127.0.0.24:10911"  # registered a moment ago
    assert gate.refusal(4, "127.0.0.24") is not None
    assert gate.refresher.task is None  # within the second of the last read
    now[0] += 1.5
    assert gate.refusal(4, "127.0.0.24") is not None
    assert gate.refresher.task is not None
    await gate.refresher.task
    assert gate.refusal(4, "127.0.0.24") is None
    assert table.reads == 2
    await gate.close()


async def test_a_controller_that_does_not_answer_keeps_what_was_known() -> None:
    table = Table({2: "127.0.0.21:10911"})
    gate = ReplicaHosts(table)
    await gate.refresh()
    table.fail = True
    await gate.refresh()
    assert gate.refusal(2, "127.0.0.21") is None
