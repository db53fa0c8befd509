from __future__ import annotations

from bench.peer_rounds import Contender, rotated, round_rows


async def nothing() -> object:
    return None


def contender(system: str, rates: list[float]) -> Contender:
    return Contender(system, nothing, {}, rates,
                     [{"leader": 50.0 + i, "client": 40.0} for i in range(len(rates))])


def test_over_as_many_rounds_as_systems_each_goes_first_middle_and_last_once() -> None:
    systems = [contender(s, []) for s in "ABC"]
    orders = [[c.system for c in rotated(systems, k)] for k in range(3)]
    assert orders == [["A", "B", "C"], ["B", "C", "A"], ["C", "A", "B"]]
    for name in "ABC":
        assert sorted(order.index(name) for order in orders) == [0, 1, 2]


def test_rows_give_the_median_and_each_rounds_ratio_to_the_baseline() -> None:
    ours = contender("mqcluster controller", [12_000, 9_000, 11_000])
    nats = contender("NATS JetStream", [10_000, 10_000, 8_000])
    rows = {r.metric.split(":")[0]: r for r in round_rows([ours, nats])}
    mine = rows["mqcluster controller"]
    assert mine.value == 11_000
    assert "per round: 1.20, 0.90, 1.38" in mine.note
    assert "median ratio 1.10" in mine.note
    assert "leader 51, client 40" in mine.note
    assert rows["NATS JetStream"].value == 10_000
    assert "per round" not in rows["NATS JetStream"].note


def test_a_system_without_rates_gets_no_row() -> None:
    assert round_rows([contender("NATS JetStream", [])]) == []
