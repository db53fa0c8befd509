"""Objects of a ``BrokerGroup``: ConfigMap, Services, StatefulSet, PDB."""

from __future__ import annotations

from .. import names
from ..config_keys import BROKER_RUNTIME_KEYS
from ..models import BrokerGroupSpec
from . import pods, properties, services
from .controller import ControllerView
from .meta import Obj, Owner, SpecError, content_hash, labels, metadata, selector_labels

COMPONENT = "broker"
CONF = "broker.conf"
HANDOVER_TIMEOUT_SECONDS = 45


def namesrv_addr(spec: BrokerGroupSpec, controller: ControllerView | None) -> str:
    if spec.namesrvAddr:
        return spec.namesrvAddr
    if controller is not None and controller.namesrv_addr_value():
        return controller.namesrv_addr_value() or ""
    raise SpecError(
        "namesrvAddr is required unless controllerRef names a Controller embedded in namesrv"
    )


def dledger_peers(owner: Owner, spec: BrokerGroupSpec) -> str:
    return ";".join(
        f"n{i}-{names.pod_dns(owner.name, i, owner.namespace)}:{spec.ports.dledger}"
        for i in range(spec.replicas)
    )


def shared_properties(
    owner: Owner, spec: BrokerGroupSpec, controller: ControllerView | None
) -> properties.Props:
    broker_name = spec.broker_name(owner.name)
    detect = spec.failureDetection
    props: properties.Props = {
        "brokerClusterName": spec.clusterName,
        "brokerName": broker_name,
        "namesrvAddr": namesrv_addr(spec, controller),
        "listenPort": str(spec.ports.listen),
        "haListenPort": str(spec.ports.ha),
        "grpcServerPort": str(spec.ports.grpc),
        # Clients come in through the group's master Service (or its load balancer); routes
        # naming that access point rather than a pod keep working across a failover.
        "grpcRouteAccessPoint": "true",
        "metricsPromExporterPort": str(spec.ports.metrics),
        "storePathRootDir": pods.DATA_DIR,
        "storePathCommitLog": f"{pods.DATA_DIR}/commitlog",
    }
    if spec.mode == "Controller":
        if controller is None:
            raise SpecError("mode Controller needs the Controller named by controllerRef")
        props.update(
            {
                "enableControllerMode": "true",
                "controllerAddr": controller.controller_addr_value(),
                "storePathEpochFile": f"{pods.DATA_DIR}/epochFileCheckpoint",
                "allAckInSyncStateSet": properties.flag(spec.allAckInSyncStateSet),
                "inSyncReplicas": str(spec.inSyncReplicas),
                "minInSyncReplicas": str(spec.minInSyncReplicas),
                # Rendered even at their defaults: the file says how soon a hung master
                # is replaced, whatever the image's defaults are.
                "brokerHeartbeatInterval": str(detect.brokerHeartbeatInterval),
                "controllerHeartBeatTimeoutMills": str(detect.controllerHeartBeatTimeoutMills),
            }
        )
    elif spec.mode == "DLedger":
        props.update(
            {
                "enableDLegerCommitLog": "true",
                "dLegerGroup": broker_name,
                "dLegerPeers": dledger_peers(owner, spec),
                "heartBeatTimeIntervalMs": str(detect.heartBeatTimeIntervalMs),
                "maxHeartBeatLeak": str(detect.maxHeartBeatLeak),
            }
        )
    else:
        props.update(
            {
                "inSyncReplicas": str(spec.inSyncReplicas),
                "minInSyncReplicas": str(spec.minInSyncReplicas),
            }
        )
    props.update(sorted(spec.brokerConfig.items()))
    return props


def pod_properties(owner: Owner, spec: BrokerGroupSpec, ordinal: int) -> properties.Props:
    props: properties.Props = {"brokerIP1": names.pod_dns(owner.name, ordinal, owner.namespace)}
    if spec.mode == "Controller":
        learner = ordinal >= spec.replicas - spec.asyncLearnerReplicas
        props["asyncLearner"] = properties.flag(learner)
    elif spec.mode == "DLedger":
        props["dLegerSelfId"] = f"n{ordinal}"
    else:
        props["brokerId"] = str(ordinal)
        if ordinal == 0:
            props["brokerRole"] = "SYNC_MASTER" if spec.inSyncReplicas > 1 else "ASYNC_MASTER"
        else:
            props["brokerRole"] = "SLAVE"
    return props


def config_data(
    owner: Owner, spec: BrokerGroupSpec, controller: ControllerView | None
) -> dict[str, str]:
    header = f"BrokerGroup {owner.namespace}/{owner.name}, mode {spec.mode}"
    data = {CONF: properties.render(shared_properties(owner, spec, controller), header)}
    for i in range(spec.replicas):
        data[f"pod-{i}.conf"] = properties.render(pod_properties(owner, spec, i))
    return data


def runtime_config(spec: BrokerGroupSpec) -> dict[str, str]:
    """The keys of broker.conf that the brokers take without a restart, with their values."""
    props: dict[str, str] = {}
    if spec.mode == "Controller":
        props["allAckInSyncStateSet"] = properties.flag(spec.allAckInSyncStateSet)
    if spec.mode != "DLedger":
        props.update({"inSyncReplicas": str(spec.inSyncReplicas),
                      "minInSyncReplicas": str(spec.minInSyncReplicas)})
    props.update(spec.brokerConfig)
    return {k: v for k, v in sorted(props.items()) if k in BROKER_RUNTIME_KEYS}


def restart_relevant(spec: BrokerGroupSpec, data: dict[str, str]) -> dict[str, str]:
    """What the pod template's config hash covers: the shared file without the runtime
    keys' lines (changing only those restarts no pod), and instead of the per-pod files,
    which follow from each pod's ordinal, the ordinals that are async learners. Scaling
    adds or drops per-pod files; it restarts nobody unless the learners move."""
    def keep(line: str) -> bool:
        return line.partition("=")[0] not in BROKER_RUNTIME_KEYS
    out = {name: "\n".join(filter(keep, text.split("\n"))) for name, text in data.items()
           if not name.startswith("pod-")}
    if spec.mode == "Controller" and spec.asyncLearnerReplicas:
        first = spec.replicas - spec.asyncLearnerReplicas
        out["asyncLearners"] = ",".join(str(i) for i in range(first, spec.replicas))
    return out


def ports(spec: BrokerGroupSpec) -> dict[str, int]:
    out = {
        "remoting": spec.ports.listen,
        "ha": spec.ports.ha,
        "grpc": spec.ports.grpc,
        "metrics": spec.ports.metrics,
    }
    if spec.mode == "DLedger":
        out["dledger"] = spec.ports.dledger
    return out


def pre_stop(spec: BrokerGroupSpec) -> Obj:
    """A master hands its role to an in-sync slave before it stops (mqcluster.broker.prestop);
    a slave, or a broker in another mode, just stops."""
    return {
        "exec": {
            "command": [
                "python",
                "-m",
                "mqcluster.broker.prestop",
                "-c",
                f"{pods.RUN_DIR}/{CONF}",
                "--timeout",
                str(HANDOVER_TIMEOUT_SECONDS),
            ]
        }
    }


def statefulset(owner: Owner, spec: BrokerGroupSpec, config_hash: str) -> Obj:
    selector = selector_labels(owner, COMPONENT)
    obj_labels = broker_labels(owner, spec)
    container: Obj = {
        "name": COMPONENT,
        "image": spec.image_ref(),
        "imagePullPolicy": spec.imagePullPolicy,
        "command": pods.start_script(CONF, "mqbroker"),
        "env": pods.pod_env(),
        "ports": pods.container_ports(ports(spec)),
        **pods.health_probes(),
        "lifecycle": {"preStop": pre_stop(spec)},
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
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": template_meta,
                "spec": {
                    "securityContext": pods.pod_security_context(),
                    "terminationGracePeriodSeconds": HANDOVER_TIMEOUT_SECONDS + 30,
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


def broker_labels(owner: Owner, spec: BrokerGroupSpec) -> dict[str, str]:
    return {
        **labels(owner, COMPONENT, spec.version),
        names.LABEL_BROKER_NAME: spec.broker_name(owner.name),
    }


def client_service(owner: Owner, spec: BrokerGroupSpec) -> Obj:
    """The client endpoint: always the current master (pods labelled role=master)."""
    svc = spec.service
    grpc: Obj = {"name": "grpc", "port": svc.grpcPort, "targetPort": "grpc", "protocol": "TCP"}
    remoting: Obj = {
        "name": "remoting", "port": svc.remotingPort, "targetPort": "remoting", "protocol": "TCP",
    }
    if svc.type != "ClusterIP":
        if svc.grpcNodePort:
            grpc["nodePort"] = svc.grpcNodePort
        if svc.remotingNodePort:
            remoting["nodePort"] = svc.remotingNodePort
    selector = {**selector_labels(owner, COMPONENT), names.LABEL_ROLE: names.ROLE_MASTER}
    return services.service(
        owner, names.client_service(owner.name), broker_labels(owner, spec), selector,
        [grpc, remoting], svc.type, svc.annotations,
    )


def read_service(owner: Owner, spec: BrokerGroupSpec) -> Obj:
    """Every ready replica, for reads from slaves (slaveReadEnable) and diagnostics."""
    svc_ports = services.service_ports(
        {"grpc": spec.service.grpcPort, "remoting": spec.service.remotingPort}
    )
    return services.service(
        owner, names.read_service(owner.name), broker_labels(owner, spec),
        selector_labels(owner, COMPONENT), svc_ports,
    )


def build_brokergroup(
    owner: Owner, spec: BrokerGroupSpec, controller: ControllerView | None = None
) -> list[Obj]:
    """ConfigMap, headless/client/read Services, StatefulSet and PDB of a BrokerGroup.

    ``controller`` is the Controller named by ``controllerRef``; raises SpecError
    when the spec cannot be built (no namesrv address, missing controller).
    """
    selector = selector_labels(owner, COMPONENT)
    obj_labels = broker_labels(owner, spec)
    data = config_data(owner, spec, controller)
    return [
        services.config_map(owner, names.config_map(owner.name), obj_labels, data),
        services.headless_service(
            owner, names.headless_service(owner.name), obj_labels, selector, ports(spec)
        ),
        statefulset(owner, spec, content_hash(restart_relevant(spec, data))),
        client_service(owner, spec),
        read_service(owner, spec),
        services.pod_disruption_budget(owner, names.pdb(owner.name), obj_labels, selector),
    ]


def clear_store_container(spec: BrokerGroupSpec, migration_id: str) -> Obj:
    """The init container that clears a DLedger store once for a migration to controller
    mode, keeping ``spec.migration.keepFiles`` (``python -m mqcluster.store.clear``)."""
    command = ["python", "-m", "mqcluster.store.clear", "--store", pods.DATA_DIR,
               "--id", migration_id]
    for path in spec.migration.keepFiles:
        command += ["--keep", path]
    return {
        "name": "clear-store",
        "image": spec.image_ref(),
        "imagePullPolicy": spec.imagePullPolicy,
        "command": command,
        "securityContext": pods.container_security_context(),
        "volumeMounts": [{"name": "data", "mountPath": pods.DATA_DIR}],
    }


def for_migration(objects: list[Obj], spec: BrokerGroupSpec, stopped: bool,
                  clear_store: str | None) -> list[Obj]:
    """The group's objects while a migration stops its pods or clears their stores."""
    out = []
    for obj in objects:
        if obj["kind"] == "StatefulSet" and (stopped or clear_store):
            obj = {**obj, "spec": dict(obj["spec"])}
            if stopped:
                obj["spec"]["replicas"] = 0
            if clear_store:
                template = obj["spec"]["template"]
                pod_spec = {**template["spec"],
                            "initContainers": [clear_store_container(spec, clear_store)]}
                obj["spec"]["template"] = {**template, "spec": pod_spec}
        out.append(obj)
    return out
