"""Field ownership against the emulator's server-side apply, through the operator's client.

Each writer of ``status.conditions`` (the reconciliation, the election followers) applies
only its own entries; whatever stale view one of them acts on, it never erases nor
reverts the other's conditions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import kmock
import pytest
import pytest_asyncio

from mqcluster_operator.conditions import FOLLOWER, RECONCILER, set_condition
from mqcluster_operator.k8s import APPLY_PATCH, Api, ApiError, Ref
from mqcluster_testing.operator.emulator import TEST_CLIENT, Emulator

pytestmark = pytest.mark.asyncio

NOW = "2026-01-01T00:00:00Z"
GROUP = Ref("mqcluster.io/v1alpha1", "BrokerGroup", "mq", "broker-a")
CM = Ref("v1", "ConfigMap", "mq", "broker-a-config")


@pytest_asyncio.fixture
async def api() -> AsyncIterator[tuple[Api, Emulator]]:
    import kopf

    async with Emulator() as emulator, kmock.Server(emulator) as server:
        client = Api(kopf.ConnectionInfo(server=str(server.url).rstrip("/")),
                     user_agent=TEST_CLIENT)
        try:
            yield client, emulator
        finally:
            await client.close()


def types(obj: dict[str, Any] | None) -> dict[str, str]:
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return {c["type"]: c["status"] for c in conds}


async def test_follower_and_reconciler_never_erase_each_others_conditions(
    api: tuple[Api, Emulator],
) -> None:
    client, _ = api
    await client.create({"apiVersion": GROUP.api_version, "kind": "BrokerGroup",
                         "metadata": {"name": GROUP.name, "namespace": "mq"},
                         "spec": {"mode": "Controller"}})
    stale = await client.get(GROUP) or {}  # both writers start from this empty status
    ready = set_condition([], "Ready", True, "Ready", "", NOW)
    await client.write_status(GROUP, {"conditions": ready, "phase": "Running"}, RECONCILER)
    elected = set_condition([], "MasterElected", True, "Elected", "broker-a-0", NOW)
    await client.write_status(GROUP, {"conditions": elected}, FOLLOWER)
    assert types(await client.get(GROUP)) == {"Ready": "True", "MasterElected": "True"}

    # The reconciler, from its stale view, sets Ready=False and a list without MasterElected;
    # the follower, from the same stale view, writes a list without Ready.
    not_ready = set_condition(types_list(stale), "Ready", False, "ReplicasNotReady", "", NOW)
    await client.write_status(GROUP, {"conditions": not_ready}, RECONCILER)
    lost = set_condition(types_list(stale), "MasterElected", None, "ProbeFailed", "", NOW)
    await client.write_status(GROUP, {"conditions": lost}, FOLLOWER)
    assert types(await client.get(GROUP)) == {"Ready": "False", "MasterElected": "Unknown"}

    # A writer that stops setting one of its own types removes it, and only it.
    upgrading = set_condition(lost, "Upgrading", True, "Rolling", "", NOW)
    await client.write_status(GROUP, {"conditions": upgrading}, FOLLOWER)
    await client.write_status(GROUP, {"conditions": lost}, FOLLOWER)
    assert types(await client.get(GROUP)) == {"Ready": "False", "MasterElected": "Unknown"}
    # A writer never applies another's types, even when its list carries them.
    await client.write_status(GROUP, {"conditions": [*not_ready, *upgrading]}, RECONCILER)
    assert types(await client.get(GROUP)) == {"Ready": "False", "MasterElected": "Unknown"}


def types_list(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("status") or {}).get("conditions") or [])


async def test_apply_removes_dropped_fields_and_defaults_cause_no_write(
    api: tuple[Api, Emulator],
) -> None:
    client, _ = api
    desired = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": CM.name, "namespace": "mq", "labels": {"a": "1", "b": "2"}},
               "data": {"k": "v", "old": "x"}}
    await client.apply(desired)
    first = await client.get(CM) or {}
    await client.apply(desired)
    assert (await client.get(CM) or {})["metadata"]["resourceVersion"] == \
        first["metadata"]["resourceVersion"]
    desired["metadata"]["labels"] = {"a": "1"}
    desired["data"] = {"k": "v"}
    await client.apply(desired)
    now = await client.get(CM) or {}
    assert now["metadata"]["labels"] == {"a": "1"} and now["data"] == {"k": "v"}


async def test_a_stale_resource_version_is_a_conflict(api: tuple[Api, Emulator]) -> None:
    client, _ = api
    await client.apply({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": CM.name, "namespace": "mq"}, "data": {"k": "v"}})
    version = (await client.get(CM) or {})["metadata"]["resourceVersion"]
    await client.patch(CM, {"data": {"k": "w"}})
    with pytest.raises(ApiError) as err:
        await client.patch(CM, {"metadata": {"resourceVersion": version}, "data": {"k": "z"}})
    assert err.value.status == 409 and err.value.transient


async def test_applying_a_field_another_manager_owns_conflicts_unless_forced(
    api: tuple[Api, Emulator],
) -> None:
    client, _ = api
    desired = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": CM.name, "namespace": "mq"}, "data": {"k": "v"}}
    await client.apply(desired)
    theirs = {**desired, "data": {"k": "theirs"}}
    with pytest.raises(ApiError) as err:
        await client._call("PATCH", CM.path(), body=theirs, content_type=APPLY_PATCH,
                           params={"fieldManager": "someone-else"})
    assert err.value.status == 409
    await client._call("PATCH", CM.path(), body=theirs, content_type=APPLY_PATCH,
                       params={"fieldManager": "someone-else", "force": "true"})
    assert (await client.get(CM) or {})["data"] == {"k": "theirs"}
