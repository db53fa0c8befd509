"""Runtime config: which keys are pushed without a restart, and that they change the
ConfigMap but not the pod template."""

from __future__ import annotations

from typing import Any

import pytest

from mqcluster.broker.handlers.ops import RUNTIME_KEYS
from mqcluster_operator.config_keys import BROKER_RUNTIME_KEYS
from mqcluster_operator.follow.runtime_config_plan import runtime_changes
from mqcluster_operator.manifests import Owner, build_brokergroup, controller_view
from mqcluster_operator.manifests.broker import runtime_config
from mqcluster_operator.models import BrokerGroupSpec, ControllerSpec


@pytest.mark.parametrize(("desired", "applied", "changes"), [
    ({"brokerPermission": "6"}, None, {}),  # first look: record what the pods started with
    ({"brokerPermission": "6"}, {"brokerPermission": "6"}, None),
    ({"brokerPermission": "4"}, {"brokerPermission": "6"}, {"brokerPermission": "4"}),
    ({"brokerPermission": "6", "minInSyncReplicas": "2"}, {"brokerPermission": "6"},
     {"minInSyncReplicas": "2"}),
    ({}, {"brokerPermission": "6"}, {}),  # removed: the record follows, nothing pushed
])
def test_runtime_config_changes(desired: dict[str, str], applied: dict[str, str] | None,
                                changes: dict[str, str] | None) -> None:
    assert runtime_changes(desired, applied) == changes


def template_and_config(config: dict[str, str], **spec: Any) -> tuple[Any, str]:
    view = controller_view("mqc", "ns", ControllerSpec.model_validate(
        {"replicas": 1, "deployment": "EmbeddedInNamesrv"}))
    objs = build_brokergroup(
        Owner(kind="BrokerGroup", name="bg", namespace="ns", uid="u"),
        BrokerGroupSpec.model_validate({"replicas": 3, "controllerRef": {"name": "mqc"},
                                        "brokerConfig": config, **spec}), view)
    sts = next(o for o in objs if o["kind"] == "StatefulSet")
    cm = next(o for o in objs if o["kind"] == "ConfigMap")
    return sts["spec"]["template"], cm["data"]["broker.conf"]


def test_runtime_keys_change_the_config_map_but_not_the_pod_template() -> None:
    """So that no revision (no roll) follows; the follower pushes them with
    updateBrokerConfig instead."""
    base, base_conf = template_and_config({"autoCreateTopicEnable": "true"})
    runtime, runtime_conf = template_and_config({"autoCreateTopicEnable": "false"},
                                                minInSyncReplicas=2, inSyncReplicas=2)
    assert runtime == base and runtime_conf != base_conf
    assert "autoCreateTopicEnable=false" in runtime_conf
    restart, _ = template_and_config({"autoCreateTopicEnable": "true",
                                      "fileReservedTime": "24"})
    assert restart != base


def test_the_runtime_keys_are_ones_the_broker_applies_at_once() -> None:
    assert BROKER_RUNTIME_KEYS <= RUNTIME_KEYS
    spec = BrokerGroupSpec.model_validate({
        "replicas": 3, "controllerRef": {"name": "mqc"}, "allAckInSyncStateSet": True,
        "brokerConfig": {"autoCreateTopicEnable": "false", "fileReservedTime": "24"}})
    assert runtime_config(spec) == {"allAckInSyncStateSet": "true",
                                    "autoCreateTopicEnable": "false",
                                    "inSyncReplicas": "1", "minInSyncReplicas": "1"}
