"""Objects of a ``Controller``: ConfigMap, headless Service, StatefulSet, PDB."""

from __future__ import annotations

from dataclasses import dataclass

from .. import names
from ..models import ControllerSpec
from . import pods, properties, services
from .meta import Obj, Owner, content_hash, image_tag, labels, metadata, selector_labels

COMPONENT = "controller"
STORE_DIR = f"{pods.DATA_DIR}/controller"


@dataclass(frozen=True)
class ControllerView:
    """What a BrokerGroup needs to know about the Controller it refers to."""

    name: str
    namespace: str
    controller_addr: tuple[str, ...]
    namesrv_addr: tuple[str, ...]
    metrics_port: int

    def controller_addr_value(self) -> str:
        return ";".join(self.controller_addr)

    def namesrv_addr_value(self) -> str | None:
        return ";".join(self.namesrv_addr) or None


def controller_view(name: str, namespace: str, spec: ControllerSpec) -> ControllerView:
    def addrs(port: int) -> tuple[str, ...]:
        return tuple(f"{names.pod_dns(name, i, namespace)}:{port}" for i in range(spec.replicas))

    return ControllerView(
        name=name,
        namespace=namespace,
        controller_addr=addrs(spec.ports.controller),
        namesrv_addr=addrs(spec.ports.namesrv) if spec.embedded() else (),
        metrics_port=spec.ports.metrics,
    )


def conf_name(spec: ControllerSpec) -> str:
    return "namesrv.conf" if spec.embedded() else "controller.conf"


def command(spec: ControllerSpec) -> str:
    return "mqnamesrv" if spec.embedded() else "mqcontroller"


def peers(owner: Owner, spec: ControllerSpec) -> str:
    """controllerDLegerPeers: every controller serves brokers and peers on this address."""
    return ";".join(
        f"n{i}-{names.pod_dns(owner.name, i, owner.namespace)}:{spec.ports.controller}"
        for i in range(spec.replicas)
    )


def shared_properties(owner: Owner, spec: ControllerSpec) -> properties.Props:
    props: properties.Props = {}
    if spec.embedded():
        props["listenPort"] = str(spec.ports.namesrv)
        props["enableControllerInNamesrv"] = "true"
    else:
        props["listenPort"] = str(spec.ports.controller)
    props.update(
        {
            "controllerDLegerGroup": owner.name,
            "controllerDLegerPeers": peers(owner, spec),
            "controllerStorePath": STORE_DIR,
            "metricsPromExporterPort": str(spec.ports.metrics),
            # Rendered even at their defaults: the file says how soon a hung master is
            # acted on (with the brokers' controllerHeartBeatTimeoutMills).
            "scanNotActiveBrokerInterval": str(spec.failureDetection.scanNotActiveBrokerInterval),
            "brokerHeartbeatTimeoutMills": str(spec.failureDetection.brokerHeartbeatTimeoutMills),
        }
    )
    props.update(sorted(spec.config.items()))
    return props


def config_data(owner: Owner, spec: ControllerSpec) -> dict[str, str]:
    data = {
        conf_name(spec): properties.render(
            shared_properties(owner, spec), f"Controller {owner.namespace}/{owner.name}"
        )
    }
    for i in range(spec.replicas):
        data[f"pod-{i}.conf"] = properties.render({"controllerDLegerSelfId": f"n{i}"})
    return data


def ports(spec: ControllerSpec) -> dict[str, int]:
    out = {"controller": spec.ports.controller, "metrics": spec.ports.metrics}
    if spec.embedded():
        out["namesrv"] = spec.ports.namesrv
    return out


def statefulset(owner: Owner, spec: ControllerSpec, config_hash: str) -> Obj:
    selector = selector_labels(owner, COMPONENT)
    obj_labels = labels(owner, COMPONENT, image_tag(spec.image))
    container: Obj = {
        "name": COMPONENT,
        "image": spec.image,
        "imagePullPolicy": spec.imagePullPolicy,
        "command": pods.start_script(conf_name(spec), command(spec)),
        "env": pods.pod_env(),
        "ports": pods.container_ports(ports(spec)),
        **pods.health_probes(),
        "resources": dict(spec.resources),
        "securityContext": pods.container_security_context(),
        "volumeMounts": pods.volume_mounts(),
    }
    template_meta: Obj = {
        "labels": {**spec.podLabels, **obj_labels},
        "annotations": {**spec.podAnnotations, names.ANNOTATION_CONFIG_HASH: config_hash},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata(owner, owner.name, obj_labels),
        "spec": {
            "serviceName": names.headless_service(owner.name),
            "replicas": spec.replicas,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": template_meta,
                "spec": {
                    "securityContext": pods.pod_security_context(),
                    "terminationGracePeriodSeconds": 30,
                    "enableServiceLinks": False,
                    **pods.scheduling_fields(selector, spec.scheduling),
                    "containers": [container],
                    "volumes": pods.volumes(names.config_map(owner.name)),
                },
            },
            "volumeClaimTemplates": [pods.claim_template(spec.storage, selector)],
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": "Retain",
                "whenScaled": "Retain",
            },
        },
    }


def build_controller(owner: Owner, spec: ControllerSpec) -> list[Obj]:
    """ConfigMap, headless Service, StatefulSet and PDB of a Controller."""
    selector = selector_labels(owner, COMPONENT)
    obj_labels = labels(owner, COMPONENT, image_tag(spec.image))
    data = config_data(owner, spec)
    return [
        services.config_map(owner, names.config_map(owner.name), obj_labels, data),
        services.headless_service(
            owner, names.headless_service(owner.name), obj_labels, selector, ports(spec)
        ),
        statefulset(owner, spec, content_hash(data)),
        services.pod_disruption_budget(owner, names.pdb(owner.name), obj_labels, selector),
    ]
