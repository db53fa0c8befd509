"""Per-object serialisation of the reconciliations (handlers.reconciling)."""

import asyncio

import kopf

from mqcluster_operator import handlers


async def test_reconciliations_of_one_object_never_overlap() -> None:
    """The resync timer and an update handler of the same object take turns; other
    objects are not held up."""
    memo = kopf.Memo(reconciling=asyncio.Semaphore(4))
    first = kopf.Body({"metadata": {"uid": "u1", "namespace": "mq", "name": "a"}})
    other = kopf.Body({"metadata": {"uid": "u2", "namespace": "mq", "name": "b"}})
    inside: list[str] = []
    release = asyncio.Event()

    async def reconcile(body: kopf.Body, tag: str) -> None:
        async with handlers.reconciling(memo, body):
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
