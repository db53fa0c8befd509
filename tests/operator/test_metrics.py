import pytest

from mqcluster_operator import metrics


def sample(name: str, labels: dict[str, str]) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_reconcile_timer_counts_results_and_records_duration() -> None:
    ok = {"resource": "Probe", "result": "ok"}
    err = {"resource": "Probe", "result": "error"}
    before_ok, before_err = (
        sample("mqcluster_operator_reconciles_total", ok),
        sample("mqcluster_operator_reconciles_total", err),
    )
    with metrics.reconcile_timer("Probe"):
        pass
    with pytest.raises(RuntimeError), metrics.reconcile_timer("Probe"):
        raise RuntimeError("boom")
    assert sample("mqcluster_operator_reconciles_total", ok) == before_ok + 1
    assert sample("mqcluster_operator_reconciles_total", err) == before_err + 1
    count = sample("mqcluster_operator_reconcile_seconds_count", {"resource": "Probe"})
    assert count >= 2
