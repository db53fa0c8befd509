from mqcluster_operator.applied import AppliedCache

CM = {"apiVersion": "v1", "kind": "ConfigMap",
      "metadata": {"name": "c", "namespace": "mq"}, "data": {"k": "v"}}


def test_an_unchanged_object_is_skipped_until_it_is_due_again() -> None:
    now = [0.0]
    cache = AppliedCache(600.0, clock=lambda: now[0])
    assert not cache.fresh(CM)
    cache.remember(CM)
    now[0] = 599.0
    assert cache.fresh(CM)
    assert not cache.fresh({**CM, "data": {"k": "w"}})
    now[0] = 600.0
    assert not cache.fresh(CM)


def test_a_failed_apply_is_not_remembered() -> None:
    cache = AppliedCache(600.0, clock=lambda: 0.0)
    cache.remember(CM)
    cache.forget(CM)
    assert not cache.fresh(CM)
