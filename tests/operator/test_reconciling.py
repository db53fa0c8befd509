"""The reconciliation around the planners: per-object serialisation, retries, refusals."""

import asyncio

import kopf
import pytest

from mqcluster_operator import handlers
from mqcluster_operator.applied import AppliedCache
from mqcluster_operator.k8s import ApiError


async def test_reconciliations_of_one_object_never_overlap() -> None:
    """The resync timer and an update handler of the same object take turns; other
    objects are not held up."""
    state = handlers.operator_state(kopf.Memo(reconciling=asyncio.Semaphore(4)))
    first = kopf.Body({"metadata": {"uid": "u1", "namespace": "mq", "name": "a"}})
    other = kopf.Body({"metadata": {"uid": "u2", "namespace": "mq", "name": "b"}})
    inside: list[str] = []
    release = asyncio.Event()

    async def reconcile(body: kopf.Body, tag: str) -> None:
        async with handlers.reconciling(state, body):
            inside.append(tag)
            await release.wait()

    timer = asyncio.create_task(reconcile(first, "timer"))
    update = asyncio.create_task(reconcile(first, "update"))
    elsewhere = asyncio.create_task(reconcile(other, "other"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert sorted(inside) == ["other", "timer"]
    release.set()
    await asyncio.gather(timer, update, elsewhere)
    assert inside[-1] == "update"


class FailingApi:
    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    async def apply(self, obj: dict[str, object]) -> str:
        self.calls += 1
        raise self.error


STS = {"apiVersion": "apps/v1", "kind": "StatefulSet",
       "metadata": {"name": "bg", "namespace": "mq"}}


async def test_throttling_is_retried_after_the_servers_retry_after() -> None:
    api = FailingApi(ApiError(429, "TooManyRequests", "slow down", retry_after=7.0))
    with pytest.raises(kopf.TemporaryError) as err:
        await handlers.apply_objects(api, [STS])  # type: ignore[arg-type]
    assert err.value.delay == 7.0


async def test_a_refused_write_is_reported_not_retried() -> None:
    api = FailingApi(ApiError(422, "Invalid", "spec: Forbidden: volumeClaimTemplates"))
    cache = AppliedCache(600.0)
    refused = await handlers.apply_objects(api, [STS, STS], cache)  # type: ignore[arg-type]
    assert refused is not None and refused[0] == "StorageImmutable"
    assert api.calls == 1 and not cache.fresh(STS)
