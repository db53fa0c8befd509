"""A pod's container as a local process: shared by the emulator's kubelet (kubelet.py) and
the real control plane's node agent (realplane/node_agent.py).

The container's start script (``cat <conf dir>/<file> ... > ...; exec <tool> -c ...``)
names the ConfigMap key and the program; the pod's properties are rendered from the
ConfigMap as the script would concatenate them, then made local (``localize``): each
pod listens on its own 127.n.0.x address, its data under its own directory. Init
containers (``python -m ...`` commands) run first. The program is started as
``mqcluster local up`` starts it (``mqcluster_operator.local.runner``).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqcluster_operator import names
from mqcluster_operator.local.plan import localize, pod_configs
from mqcluster_operator.local.runner import PROGRAMS, command, write_config
from mqcluster_operator.manifests import pods as pod_manifests
from mqcluster_testing.broker.procs import Proc


def ip_prefix() -> str:
    """A /24 of 127/8 for this test process: concurrent test runs on the host (and the
    tests that use 127.0.0.x) bind the same fixed ports (10911, 9876)."""
    return f"127.{30 + os.getpid() % 200}.0"


@dataclass
class Addresses:
    """A stable local address per pod name, and DNS names mapped to them."""

    base: int = 40
    prefix: str = field(default_factory=ip_prefix)
    ips: dict[str, str] = field(default_factory=dict)

    def ip_of(self, pod: str) -> str:
        if pod not in self.ips:
            self.ips[pod] = f"{self.prefix}.{self.base + len(self.ips)}"
        return self.ips[pod]

    def resolve(self, address: str) -> str:
        """``bg-1.bg-headless.ns.svc:10911`` (or a URL holding one) -> ``127.n.0.x:10911``."""
        def local(m: re.Match[str]) -> str:
            return self.ip_of(m.group(1))  # stable per pod name, whoever asks first
        return re.sub(r"\b([a-z][a-z0-9-]*-\d+)\.[a-z][a-z0-9-]*(?:\.[a-z0-9-]+)*", local,
                      address)

    def hosts(self, statefulsets: list[dict[str, Any]]) -> dict[str, str]:
        """``<pod>.<service>`` -> local address for every pod the StatefulSets may have."""
        out = {}
        for sts in statefulsets:
            name, spec = sts["metadata"]["name"], sts["spec"]
            for i in range(max(int(spec.get("replicas") or 0), 1)):
                pod = names.pod(name, i)
                out[f"{pod}.{spec['serviceName']}"] = self.ip_of(pod)
        return out


@dataclass
class PodProcess:
    """A pod's running process, the pod's uid and the revision it was started from."""

    proc: Proc
    uid: str
    revision: str


@dataclass(frozen=True)
class Container:
    """What a pod's first container runs: the program and the ConfigMap key it reads."""

    tool: str
    conf_key: str
    config_map: str

    @classmethod
    def of(cls, pod_spec: Mapping[str, Any]) -> Container:
        script = pod_spec["containers"][0]["command"][-1]
        conf = re.search(r"cat \S+/(\S+) ", script)
        command = re.search(r"exec (\S+) -c", script)
        if not (conf and command):
            raise ValueError(f"not a start script this test kubelet knows: {script!r}")
        config_map = next(v["configMap"]["name"] for v in pod_spec["volumes"]
                          if "configMap" in v)
        return cls(command.group(1), conf.group(1), config_map)


async def start_process(
    pod: str, ordinal: int, pod_spec: Mapping[str, Any], config: Mapping[str, str],
    root: Path, ip: str, hosts: Mapping[str, str],
) -> Proc:
    """Runs the pod's init containers, then its container; returns once it has booted."""
    container = Container.of(pod_spec)
    props = pod_configs(dict(config), container.conf_key, ordinal + 1)[ordinal]
    local = localize(props, dict(hosts), root, ip)
    root.mkdir(parents=True, exist_ok=True)
    for init in pod_spec.get("initContainers") or []:
        await run_init(init, root)
    conf_path = root / "pod.conf"
    write_config(conf_path, local)
    program = PROGRAMS[container.tool]
    proc = Proc(pod, command(program.module, conf_path), root / "pod.log")
    await proc.start(program.boot_marker)
    return proc


async def run_init(init: Mapping[str, Any], root: Path) -> None:
    argv = [sys.executable if a == "python" else a.replace(pod_manifests.DATA_DIR, str(root))
            for a in init["command"]]
    child = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"init container {init['name']} failed: {out.decode()}")
    with (root / "init.log").open("ab") as log:
        log.write(out)


async def run_pre_stop(container: Mapping[str, Any], root: Path, timeout: float) -> None:
    """The container's preStop exec hook, as a kubelet runs it before stopping the
    container: the pod's config path is its local copy (``root/pod.conf``), ``python`` this
    interpreter. The hook's outcome never keeps the pod from stopping."""
    hook = ((container.get("lifecycle") or {}).get("preStop") or {}).get("exec")
    if not hook:
        return
    argv = [sys.executable if a == "python"
            else str(root / "pod.conf") if a.startswith(pod_manifests.RUN_DIR + "/")
            else a.replace(pod_manifests.DATA_DIR, str(root))
            for a in hook["command"]]
    child = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await asyncio.wait_for(child.communicate(), timeout)
    except TimeoutError:
        child.kill()
        out = b"(preStop timed out)\n"
        await child.wait()
    with (root / "prestop.log").open("ab") as log:
        log.write(out)

