"""The proxy tier of a ``Controller``'s cluster: ConfigMap, Deployment, client Service,
PodDisruptionBudget and, when asked, a HorizontalPodAutoscaler.

``mqproxy`` is stateless (what a client carries back names its group), so the tier is a
Deployment: any replica serves any client. Rolling updates add a replica before one
goes (maxUnavailable 0); a stopping replica first leaves the Service (readiness turns
503 while it drains, and preStop waits for the endpoints to follow), then finishes the
calls in flight and sends GOAWAY, so a client's next call goes to another replica.
"""

from __future__ import annotations

from .. import names
from ..models import ControllerSpec, ProxySpec
from . import pods, properties, services
from .controller import ControllerView, controller_view
from .meta import Obj, Owner, content_hash, image_tag, labels, metadata, selector_labels

COMPONENT = "proxy"
CONF = "proxy.conf"
GRPC_PORT = 8081


def name(owner: Owner) -> str:
    return f"{owner.name}-proxy"


def endpoint(owner: Owner, spec: ProxySpec) -> str:
    """The recommended client endpoint: the client Service's DNS name and port."""
    return f"{name(owner)}.{owner.namespace}.svc:{spec.service.port}"


def proxy_properties(view: ControllerView, spec: ProxySpec) -> properties.Props:
    props: properties.Props = {
        "grpcServerPort": str(GRPC_PORT),
        "controllerAddr": view.controller_addr_value(),
        "metricsPromExporterPort": str(spec.metricsPort),
        "drainMs": str(spec.drainSeconds * 1000),
    }
    namesrv = view.namesrv_addr_value()
    if namesrv:
        props["namesrvAddr"] = namesrv
    props.update(sorted(spec.config.items()))
    return props


def start_script() -> list[str]:
    """No per-pod file: every replica runs the same configuration."""
    script = (
        "set -eu\n"
        f"cat {pods.CONFIG_DIR}/{CONF} > {pods.RUN_DIR}/{CONF}\n"
        f"exec mqproxy -c {pods.RUN_DIR}/{CONF}\n"
    )
    return ["/bin/sh", "-c", script]


def deployment(owner: Owner, cspec: ControllerSpec, config_hash: str) -> Obj:
    spec = cspec.proxy
    image = spec.image or cspec.image
    selector = selector_labels(owner, COMPONENT)
    obj_labels = labels(owner, COMPONENT, image_tag(image))
    probe = {"httpGet": {"path": "/health", "port": "metrics"}, "timeoutSeconds": 2}
    container: Obj = {
        "name": COMPONENT,
        "image": image,
        "imagePullPolicy": cspec.imagePullPolicy,
        "command": start_script(),
        "env": pods.pod_env(),
        "ports": pods.container_ports({"grpc": GRPC_PORT, "metrics": spec.metricsPort}),
        # Ready once it knows the cluster's groups; 503 while draining takes it out of
        # the Service before it stops serving.
        "readinessProbe": {**probe, "periodSeconds": 1, "failureThreshold": 1},
        "livenessProbe": {"tcpSocket": {"port": "grpc"}, "periodSeconds": 10,
                          "failureThreshold": 3},
        # The endpoints controller and every kube-proxy drop this pod before SIGTERM.
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "2"]}}},
        "resources": dict(spec.resources),
        "securityContext": pods.container_security_context(),
        "volumeMounts": [m for m in pods.volume_mounts() if m["name"] != "data"],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(owner, name(owner), obj_labels),
        "spec": {
            **({} if spec.autoscaling.enabled else {"replicas": spec.replicas}),
            "selector": {"matchLabels": selector},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "minReadySeconds": 2,
            "template": {
                "metadata": {
                    "labels": {**cspec.podLabels, **obj_labels},
                    "annotations": {**cspec.podAnnotations,
                                    names.ANNOTATION_CONFIG_HASH: config_hash},
                },
                "spec": {
                    "securityContext": pods.pod_security_context(),
                    "terminationGracePeriodSeconds": spec.drainSeconds + 10,
                    "enableServiceLinks": False,
                    **pods.scheduling_fields(selector, cspec.scheduling),
                    "containers": [container],
                    "volumes": pods.volumes(name(owner) + "-config"),
                },
            },
        },
    }


def client_service(owner: Owner, spec: ProxySpec, obj_labels: dict[str, str]) -> Obj:
    port: Obj = {"name": "grpc", "port": spec.service.port, "targetPort": "grpc",
                 "protocol": "TCP"}
    if spec.service.nodePort is not None and spec.service.type != "ClusterIP":
        port["nodePort"] = spec.service.nodePort
    return services.service(owner, name(owner), obj_labels, selector_labels(owner, COMPONENT),
                            [port], spec.service.type, spec.service.annotations)


def autoscaler(owner: Owner, spec: ProxySpec, obj_labels: dict[str, str]) -> Obj:
    a = spec.autoscaling
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata(owner, name(owner), obj_labels),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                               "name": name(owner)},
            "minReplicas": a.minReplicas or spec.replicas,
            "maxReplicas": a.maxReplicas,
            "metrics": [{"type": "Resource", "resource": {
                "name": "cpu",
                "target": {"type": "Utilization",
                           "averageUtilization": a.targetCPUUtilizationPercentage}}}],
        },
    }


def config_data(owner: Owner, cspec: ControllerSpec) -> dict[str, str]:
    view = controller_view(owner.name, owner.namespace, cspec)
    return {CONF: properties.render(proxy_properties(view, cspec.proxy),
                                    f"Proxy of Controller {owner.namespace}/{owner.name}")}


def build_proxy(owner: Owner, cspec: ControllerSpec) -> list[Obj]:
    """The proxy tier's objects (none when ``proxy.enabled`` is false)."""
    spec = cspec.proxy
    if not spec.enabled:
        return []
    obj_labels = labels(owner, COMPONENT, image_tag(spec.image or cspec.image))
    data = config_data(owner, cspec)
    out = [
        services.config_map(owner, name(owner) + "-config", obj_labels, data),
        deployment(owner, cspec, content_hash(data)),
        client_service(owner, spec, obj_labels),
        services.pod_disruption_budget(owner, name(owner), obj_labels,
                                       selector_labels(owner, COMPONENT)),
    ]
    if spec.autoscaling.enabled:
        out.append(autoscaler(owner, spec, obj_labels))
    return out
