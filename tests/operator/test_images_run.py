"""The broker image run with podman exactly as the operator's pods run it.

A Controller embedded in the name server and a controller-mode BrokerGroup are rendered by
the operator's manifest builders; each StatefulSet's pod template becomes a ``podman run``:
its user, group and fsGroup, read-only root (no tmpfs podman would add), dropped
capabilities, no privilege escalation, its volumes (the ConfigMap's files, emptyDirs, the
claim) at its mount paths, its environment (fieldRefs filled in) and its command. Pod DNS
names resolve to loopback and the containers share the host's network, so each listens on
the ports the specs give. Each pod must answer its readiness probe (the template's own
httpGet), be able to write where its HOME and TMPDIR point (the official client's logging
set-up makes ~/logs at import: on the read-only root that crashed every broker), and then
the official client (rocketmq Producer and SimpleConsumer) sends and receives through the
broker's gRPC port from the host.

Both images are built (tools/images/build.py, layer-cached) before the run, and every
command installed in each runs --help as the pods' user. The tests skip with the reason
where podman or mmdebstrap is missing or cannot run containers here.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mqcluster.client import AdminClient
from mqcluster_operator import names
from mqcluster_operator.manifests.broker import build_brokergroup
from mqcluster_operator.manifests.controller import build_controller, controller_view
from mqcluster_operator.manifests.meta import Owner
from mqcluster_operator.models import BrokerGroupSpec, ControllerSpec

# The first build on a machine makes the bases too: minutes, more than the default timeout.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]
CONTAINERS_CONF = REPO / "tools" / "images" / "containers.conf"
BASE = "localhost/mqcluster-base:bookworm"
NS = "mq"
TOPIC = "ImageTopic"
READY_TIMEOUT = 120.0

Obj = dict[str, Any]


def podman(
    *args: str, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
    return subprocess.run(["podman", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=check)


IMAGES = {"broker": "localhost/mqcluster/broker:0.1.0",
          "operator": "localhost/mqcluster/operator:0.1.0"}


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    """Build both images (cached layers make an unchanged tree take seconds; the first
    build here, bases included, about 2.5 minutes). build.py also checks their budgets."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (.ci/run installs podman, buildah, runc and "
                    "mmdebstrap with apt-get)")
    info = podman("info", check=False)
    if info.returncode != 0:
        pytest.skip(f"podman cannot run here: {info.stderr.strip()[-300:]}")
    built = subprocess.run([sys.executable, str(REPO / "tools/images/build.py")],
                           capture_output=True, text=True, timeout=900)
    if built.returncode == 2:  # a tool is missing; build.py names it
        pytest.skip(f"the images cannot be built here: {built.stderr.strip()}")
    assert built.returncode == 0, (built.stdout[-3000:], built.stderr[-3000:])
    smoke = podman("run", "--rm", "--network=none", BASE, "true", check=False)
    if smoke.returncode != 0:
        pytest.skip(f"podman cannot start containers here: {smoke.stderr.strip()[-300:]}")
    return IMAGES


# Every command the image installs (its venv's bin, less the interpreter and activation
# scripts) runs --help as the pods' user on a read-only root; pip is not there at all.
COMMANDS_PROBE = r"""
set -u
cd /opt/mqcluster/bin
[ ! -e pip ] && [ ! -e pip3 ] || { echo "pip left in the image"; exit 1; }
[ ! -e /wheels ] || { echo "/wheels left in the image"; exit 1; }
for c in *; do
    case "$c" in python*|activate*|Activate*) continue;; esac
    if out=$("./$c" --help 2>&1); then echo "ok $c"; else echo "FAILED $c: $out" | tail -5; fi
done
"""


@pytest.mark.parametrize("image", sorted(IMAGES))
def test_every_installed_command_runs_in_the_image(images: dict[str, str], image: str) -> None:
    out = podman("run", "--rm", "--network=none", "--read-only", "--read-only-tmpfs=false",
                 "--cap-drop", "ALL", "--user", "10001:10001", "--entrypoint", "/bin/sh",
                 images[image], "-c", COMMANDS_PROBE, check=False)
    assert out.returncode == 0 and "FAILED" not in out.stdout, out.stdout + out.stderr
    ran = {line.split()[1] for line in out.stdout.splitlines() if line.startswith("ok ")}
    expected = ({"mqnamesrv", "mqcontroller", "mqbroker", "mqadmin", "mqproxy", "mqraft"}
                if image == "broker" else {"kopf"})
    assert expected <= ran
    assert not ran & {"mqcluster", "mqaudit"}  # the local tools and the PySpark jobs


@pytest.mark.parametrize("image", sorted(IMAGES))
def test_layers_are_the_base_a_user_and_the_venv(images: dict[str, str], image: str) -> None:
    """No build leftovers: above the base, one layer of 1 MB or more, the venv's copy."""
    layers = json.loads(podman("history", "--format", "json", images[image]).stdout)
    big = [(layer["size"], layer["CreatedBy"]) for layer in layers[:-1]
           if layer["size"] >= 1_000_000]
    assert len(big) == 1 and "COPY" in big[0][1], big


def test_operator_image_imports_its_handlers(images: dict[str, str]) -> None:
    out = podman("run", "--rm", "--network=none", "--read-only", "--read-only-tmpfs=false",
                 "--cap-drop", "ALL", "--user", "10001:10001", "--entrypoint", "python",
                 images["operator"], "-c", "import mqcluster_operator.handlers; print('ok')",
                 check=False)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def local_image(ref: str) -> str:
    """The pod's image as podman's local storage names it (no registry: localhost/)."""
    first = ref.split("/", 1)[0]
    return ref if "." in first or ":" in first or first == "localhost" else f"localhost/{ref}"


@dataclass
class Pod:
    """One StatefulSet pod run as a podman container."""

    name: str
    container: str
    spec: Obj  # the pod template's container
    ports: dict[str, int] = field(default_factory=dict)

    def logs(self) -> str:
        out = podman("logs", self.container, check=False)
        return (out.stdout + out.stderr)[-4000:]

    def running(self) -> bool:
        out = podman("inspect", "--format", "{{.State.Running}}", self.container, check=False)
        return out.stdout.strip() == "true"


class PodRunner:
    """Runs pod templates as containers; removes every container it started."""

    def __init__(self, work: Path, hosts: list[str]) -> None:
        self.work = work
        self.hosts = hosts
        self.run_id = uuid.uuid4().hex[:8]
        self.pods: list[Pod] = []

    def volume_dirs(self, pod: str, template: Obj, claims: list[Obj],
                    config_maps: dict[str, Obj]) -> dict[str, Path]:
        spec = template["spec"]
        fs_group = spec.get("securityContext", {}).get("fsGroup")
        dirs: dict[str, Path] = {}
        for volume in spec.get("volumes", []):
            path = self.work / pod / volume["name"]
            path.mkdir(parents=True)
            if "configMap" in volume:
                for key, text in config_maps[volume["configMap"]["name"]]["data"].items():
                    (path / key).write_text(text)
                path.chmod(0o755)
            elif "emptyDir" in volume:
                path.chmod(0o777)  # as the kubelet makes an emptyDir
            else:
                raise AssertionError(f"volume kind not handled by the test: {volume}")
            dirs[volume["name"]] = path
        for claim in claims:  # a fresh PersistentVolume, group-owned by fsGroup
            path = self.work / pod / claim["metadata"]["name"]
            path.mkdir(parents=True)
            if fs_group is not None:
                os.chown(path, 0, fs_group)
            path.chmod(0o2770)
            dirs[claim["metadata"]["name"]] = path
        return dirs

    def run(self, sts: Obj, ordinal: int, config_maps: dict[str, Obj]) -> Pod:
        template = sts["spec"]["template"]
        pod_name = f"{sts['metadata']['name']}-{ordinal}"
        (container,) = template["spec"]["containers"]
        pod_sc = template["spec"].get("securityContext", {})
        sc = container.get("securityContext", {})
        dirs = self.volume_dirs(pod_name, template, sts["spec"].get("volumeClaimTemplates", []),
                                config_maps)
        args = ["run", "--detach", "--pull=never", "--network=host",
                "--name", f"mqimg-{self.run_id}-{pod_name}"]
        for host in self.hosts:
            args += ["--add-host", f"{host}:127.0.0.1"]
        uid, gid = pod_sc.get("runAsUser"), pod_sc.get("runAsGroup")
        if pod_sc.get("runAsNonRoot"):
            assert uid not in (None, 0), "runAsNonRoot needs a non-root runAsUser"
        if uid is not None:
            args += ["--user", f"{uid}:{gid if gid is not None else uid}"]
        if pod_sc.get("fsGroup") is not None:
            args += ["--group-add", str(pod_sc["fsGroup"])]
        if sc.get("readOnlyRootFilesystem"):
            # podman would mount tmpfs on /tmp, /run and /var/tmp: the kubelet does not
            args += ["--read-only", "--read-only-tmpfs=false"]
        for cap in sc.get("capabilities", {}).get("drop", []):
            args += ["--cap-drop", cap]
        if sc.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges"]
        for mount in container.get("volumeMounts", []):
            ro = ":ro" if mount.get("readOnly") else ""
            args += ["--volume", f"{dirs[mount['name']]}:{mount['mountPath']}{ro}"]
        fields = {"metadata.name": pod_name, "metadata.namespace": NS}
        for env in container.get("env", []):
            if "value" in env:
                value = env["value"]
            else:
                value = fields[env["valueFrom"]["fieldRef"]["fieldPath"]]
            args += ["--env", f"{env['name']}={value}"]
        if container.get("command"):
            args += ["--entrypoint", json.dumps(container["command"])]
        args += [local_image(container["image"]), *container.get("args", [])]
        started = podman(*args, check=False)
        assert started.returncode == 0, started.stderr
        pod = Pod(pod_name, f"mqimg-{self.run_id}-{pod_name}", container,
                  {p["name"]: p["containerPort"] for p in container.get("ports", [])})
        self.pods.append(pod)
        return pod

    def remove_all(self) -> None:
        for pod in self.pods:
            podman("rm", "--force", "--time", "2", pod.container, check=False)


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[PodRunner]:
    hosts: list[str] = []
    run = PodRunner(tmp_path, hosts)
    try:
        yield run
    finally:
        run.remove_all()


def ready(pod: Pod) -> None:
    """Poll the pod's readiness probe (its httpGet) as the kubelet would."""
    probe = pod.spec["readinessProbe"]["httpGet"]
    port = probe["port"] if isinstance(probe["port"], int) else pod.ports[probe["port"]]
    url = f"http://127.0.0.1:{port}{probe['path']}"
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        if not pod.running():
            raise AssertionError(f"{pod.name} exited before it was ready:\n{pod.logs()}")
        try:
            with urllib.request.urlopen(url, timeout=3) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{pod.name}: {url} not ready in {READY_TIMEOUT:.0f} s:\n"
                                 f"{pod.logs()}")
        time.sleep(0.5)


# What the official client's package does at import (~/logs/rocketmq_python), and a temp
# file: both must land on a volume the pod mounts.
WRITE_PROBE = (
    "import os, tempfile; "
    "os.makedirs(os.path.expanduser('~/logs/rocketmq_python'), exist_ok=True); "
    "tempfile.TemporaryFile().close(); print('writable')"
)


def home_and_tmp_writable(pod: Pod) -> None:
    out = podman("exec", pod.container, "python", "-c", WRITE_PROBE, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "writable", (
        f"{pod.name} cannot write under HOME or TMPDIR: {out.stderr.strip()[-600:]}"
    )


def official_client_round_trip(endpoint: str, bodies: list[bytes]) -> list[bytes]:
    from rocketmq import (
        ClientConfiguration,
        Credentials,
        FilterExpression,
        Message,
        Producer,
        SimpleConsumer,
    )

    asyncio.set_event_loop(asyncio.new_event_loop())  # the client's grpc.aio needs one
    producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=10),
                        (TOPIC,))
    producer.startup()
    try:
        for body in bodies:
            msg = Message()
            msg.topic, msg.body = TOPIC, body
            producer.send(msg)
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(ClientConfiguration(endpoint, Credentials(), request_timeout=10),
                              "ImageGroup", {TOPIC: FilterExpression("*")}, await_duration=2)
    consumer.startup()
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < len(bodies) and time.monotonic() < deadline:
            for message in consumer.receive(16, 15):
                got.append(message.body)
                consumer.ack(message)
    finally:
        consumer.shutdown()
    return got


async def create_topic(broker_addr: str) -> None:
    """Once the broker is master (the embedded controller elects it)."""
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            async with AdminClient(broker_addr=broker_addr, timeout=5) as admin:
                await admin.create_topic(TOPIC, queue_nums=1)
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


_ports: set[int] = set()


def port() -> int:
    """A port free on every address: the containers share the host's network and bind
    0.0.0.0, where any loopback address's listener would be in the way."""
    while True:
        with socket.socket() as s:
            s.bind(("0.0.0.0", 0))
            number = int(s.getsockname()[1])
        if number not in _ports:
            _ports.add(number)
            return number


def rendered() -> tuple[list[Obj], list[Obj]]:
    """A name server with the controller embedded, and a controller-mode broker, on free
    ports, as the operator renders them."""
    controller_spec = ControllerSpec.model_validate({
        "deployment": "EmbeddedInNamesrv", "replicas": 1,
        "ports": {"controller": port(), "namesrv": port(), "metrics": port()},
    })
    controller = build_controller(Owner("Controller", "mqc", NS, "uid-mqc"), controller_spec)
    view = controller_view("mqc", NS, controller_spec)
    broker_spec = BrokerGroupSpec.model_validate({
        "mode": "Controller", "replicas": 1, "controllerRef": {"name": "mqc"},
        "ports": {"listen": port(), "ha": port(), "grpc": port(), "metrics": port(),
                  "dledger": port()},
    })
    broker = build_brokergroup(Owner("BrokerGroup", "bg", NS, "uid-bg"), broker_spec, view)
    return controller, broker


def one(objs: list[Obj], kind: str) -> Obj:
    (obj,) = [o for o in objs if o["kind"] == kind]
    return obj


async def test_nameserver_and_broker_pods_run_as_rendered_and_serve_the_official_client(
    images: dict[str, str], runner: PodRunner,
) -> None:
    controller, broker = rendered()
    runner.hosts += [names.pod_dns("mqc", 0, NS), names.pod_dns("bg", 0, NS)]
    config_maps = {o["metadata"]["name"]: o for o in controller + broker
                   if o["kind"] == "ConfigMap"}
    namesrv = runner.run(one(controller, "StatefulSet"), 0, config_maps)
    await asyncio.to_thread(ready, namesrv)
    await asyncio.to_thread(home_and_tmp_writable, namesrv)
    pod = runner.run(one(broker, "StatefulSet"), 0, config_maps)
    await asyncio.to_thread(ready, pod)
    await asyncio.to_thread(home_and_tmp_writable, pod)

    await create_topic(f"127.0.0.1:{pod.ports['remoting']}")
    bodies = [f"image-{i}".encode() for i in range(3)]
    got = await asyncio.to_thread(official_client_round_trip,
                                  f"127.0.0.1:{pod.ports['grpc']}", bodies)
    assert sorted(got) == bodies, pod.logs()
    assert namesrv.running() and pod.running()


async def test_standalone_controller_pod_runs_as_rendered(
    images: dict[str, str], runner: PodRunner,
) -> None:
    spec = ControllerSpec.model_validate({
        "replicas": 1, "ports": {"controller": port(), "namesrv": port(), "metrics": port()},
    })
    objs = build_controller(Owner("Controller", "ctl", NS, "uid-ctl"), spec)
    runner.hosts.append(names.pod_dns("ctl", 0, NS))
    config_maps = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ConfigMap"}
    pod = runner.run(one(objs, "StatefulSet"), 0, config_maps)
    assert pod.spec["command"][-1].rstrip().endswith("controller.conf")
    await asyncio.to_thread(ready, pod)
    await asyncio.to_thread(home_and_tmp_writable, pod)
    assert pod.running()


def test_local_image_names_a_registry_less_reference_in_local_storage() -> None:
    assert local_image("mqcluster/broker:0.1.0") == "localhost/mqcluster/broker:0.1.0"
    assert local_image("registry.example:5000/b:1") == "registry.example:5000/b:1"
    assert local_image("localhost/b:1") == "localhost/b:1"
