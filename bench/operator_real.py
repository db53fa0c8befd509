"""Operator benchmark on the real control plane (../shared/kube: etcd, kube-apiserver and
kube-controller-manager v1.36): the real StatefulSet controller makes the pods, the tests'
node agent runs them as local processes, the operator (kopf, the production handlers and
intervals) follows them.

- ``kubectl apply`` (the create request) of a Controller and a 3-replica BrokerGroup to the
  group's ``Ready=True``, and the group's last pod Ready to ``Ready=True``.
- Failovers, controller mode and DLedger: the master's process is SIGKILLed (the agent
  restarts it); the election is the moment a remaining broker's ``/health`` first reports
  a master role (polled every 10 ms); from there to ``status.masterPod`` and to the new
  master's ``role=master`` label (what the client Service selects), as the bench's own
  watch sees them.
- API requests per second of the operator (kopf and its own client, told apart by their
  user agents in the API server's audit log) following 10, 30 and 100 idle groups (their
  pods stay Pending: no agent runs them) over a window that covers a resync, and with the
  periodic re-apply of every child (once per ``MQCLUSTER_REAPPLY_SECONDS``) added.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench import Row

NAME = "operator"
FAILOVERS = int(os.environ.get("OPERATOR_BENCH_FAILOVERS", "8"))
SIZES = tuple(int(n) for n in os.environ.get("OPERATOR_RATE_GROUPS", "10,30,100").split(","))
WINDOW = float(os.environ.get("OPERATOR_RATE_WINDOW_SECONDS", "35"))
REAPPLY = 600.0  # MQCLUSTER_REAPPLY_SECONDS' default
OPERATOR_AGENTS = ("kopf", "mqcluster-operator")
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"""


def kit_missing() -> str | None:
    from mqcluster_testing.operator.realplane.controlplane import kit_missing as missing

    return missing()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def controller(ns: str) -> dict[str, Any]:
    return {"apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
            "metadata": {"name": "namesrv", "namespace": ns},
            "spec": {"replicas": 1, "deployment": "EmbeddedInNamesrv"}}


def group(ns: str, name: str, mode: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"mode": mode, "replicas": 3, "minInSyncReplicas": 1}
    if mode == "Controller":
        spec["controllerRef"] = {"name": "namesrv"}
    else:
        spec["namesrvAddr"] = f"namesrv-0.namesrv-headless.{ns}.svc:9876"
    return {"apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


async def elected(agent: Any, name: str, old: str) -> float:
    """When a broker of the group other than ``old`` first says it is the master."""
    from mqcluster_operator import names
    from mqcluster_operator.follow.election_plan import MASTER_ROLES

    urls = [agent.resolve(f"http://{names.pod_dns(name, i, agent.namespace)}:5557/health")
            for i in range(3) if f"{name}-{i}" != old]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.5)) as session:
        while True:
            for url in urls:
                with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                    async with session.get(url) as resp:
                        if (await resp.json()).get("brokerRole") in MASTER_ROLES:
                            return time.monotonic()
            await asyncio.sleep(0.01)


async def with_agent(kube: Any, api: Any, ns: str, workdir: Path) -> Any:
    from mqcluster_testing.operator.realplane.mirror import Mirror
    from mqcluster_testing.operator.realplane.node_agent import NodeAgent

    await kube.create_namespace(api, ns)
    mirror = Mirror(api, ns)
    await mirror.start()
    agent = NodeAgent(api, mirror, workdir / ns)
    await agent.start()
    return agent


async def close_agent(kube: Any, api: Any, agent: Any) -> None:
    try:
        await agent.close()
    finally:
        await agent.mirror.close()
        await kube.delete_namespace(api, agent.namespace)


async def failovers(kube: Any, api: Any, workdir: Path, mode: str) -> dict[str, Any]:
    from mqcluster_testing.operator.real_operator import BG, condition, operator_on

    ns = f"bench-{mode.lower()}"
    name = "bg"
    agent = await with_agent(kube, api, ns, workdir)
    out: dict[str, Any] = {"to_status": [], "to_label": [], "election": []}
    try:
        async with operator_on(kube, agent) as run:
            applied = time.monotonic()
            await api.create(controller(ns))
            await api.create(group(ns, name, mode))

            def ready() -> bool:
                return (condition(run.obj(BG, name), "Ready") or {}).get("status") == "True"

            await run.eventually(ready, "Ready=True", timeout=300)
            ready_at = run.timeline.first("Ready", name, "True") or time.monotonic()
            last_pod = max(run.timeline.first("ready", f"{name}-{i}", True) or 0
                           for i in range(3))
            out["apply_to_ready"] = ready_at - applied
            out["last_pod_to_ready"] = ready_at - last_pod
            for _ in range(FAILOVERS):
                await run.eventually(ready, "Ready=True before a kill", timeout=300)
                old = run.status(BG, name)["masterPod"]
                killed = time.monotonic()
                election = asyncio.create_task(elected(agent, name, old))
                await agent.kill(old)

                def followed(old: str = old) -> str | None:
                    master = run.status(BG, name).get("masterPod")
                    return master if master not in (None, old) and \
                        run.role(master) == "master" else None

                new = await run.eventually(followed, "the new master followed", timeout=120)
                at = await asyncio.wait_for(election, 30)
                status_at = run.timeline.first("masterPod", name, new, after=killed)
                label_at = run.timeline.first("role", new, "master", after=killed)
                out["election"].append(at - killed)
                if status_at is not None:
                    out["to_status"].append(max(0.0, status_at - at))
                if label_at is not None:
                    out["to_label"].append(max(0.0, label_at - at))
    finally:
        await close_agent(kube, api, agent)
    return out


def audit_requests(log: Path, since: float, until: float) -> int:
    """The operator's requests (a watch counts when it starts) in [since, until] (epoch s)."""
    import datetime

    count = 0
    for line in log.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not str(event.get("userAgent", "")).startswith(OPERATOR_AGENTS):
            continue
        watch = event.get("verb") == "watch"
        if event.get("stage") != ("ResponseStarted" if watch else "ResponseComplete"):
            continue
        stamp = datetime.datetime.fromisoformat(
            str(event["stageTimestamp"]).replace("Z", "+00:00")).timestamp()
        if since <= stamp <= until:
            count += 1
    return count


async def idle_rate(kube: Any, api: Any, groups: int, log: Path
                    ) -> tuple[float, float, int]:
    from mqcluster_operator.manifests import Owner, build_brokergroup, controller_view
    from mqcluster_operator.models import BrokerGroupSpec, ControllerSpec
    from mqcluster_testing.operator.real_operator import operator_on
    from mqcluster_testing.operator.realplane.mirror import Mirror

    ns = f"bench-idle-{groups}"
    await kube.create_namespace(api, ns)
    mirror = Mirror(api, ns)
    await mirror.start()

    class NoAgent:  # the pods stay Pending; nothing to resolve or run
        namespace = ns

        def __init__(self) -> None:
            self.mirror = mirror

        def resolve(self, address: str) -> str:
            return address

    try:
        started = time.time()
        async with operator_on(kube, NoAgent()) as run:  # type: ignore[arg-type]
            await api.create(controller(ns))
            names = [f"bg-{g:03d}" for g in range(groups)]
            for name in names:
                await api.create(group(ns, name, "Controller"))
            await run.eventually(
                lambda: all(mirror.live("apps/v1/statefulsets", ns, n) for n in names),
                "every StatefulSet", timeout=300)
            await asyncio.sleep(10)  # the first rounds' writes (probe failures) settle
            since = time.time()
            await asyncio.sleep(WINDOW)
            until = time.time()
        await asyncio.sleep(2)  # the audit log is written in batches
        measured = audit_requests(log, since, until) / (until - since)
        setup = audit_requests(log, started, since)  # shows the log is read: never 0
        view = controller_view("namesrv", ns, ControllerSpec.model_validate(
            controller(ns)["spec"]))
        children = len(build_brokergroup(
            Owner("BrokerGroup", "bg-000", ns, "u"),
            BrokerGroupSpec.model_validate(group(ns, "bg-000", "Controller")["spec"]), view))
        return measured, measured + groups * children / REAPPLY, setup
    finally:
        await mirror.close()
        await kube.delete_namespace(api, ns)


async def _main() -> list[Row]:
    from mqcluster_testing.operator.realplane.controlplane import control_plane

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="mq-bench-operator-") as tmp:
        workdir = Path(tmp)
        policy, log = workdir / "audit-policy.yaml", workdir / "audit.log"
        policy.write_text(AUDIT_POLICY)
        os.environ["MQ_KUBE_APISERVER_ARGS"] = (
            f"--audit-policy-file={policy} --audit-log-path={log} --audit-log-mode=blocking")
        try:
            with control_plane() as kube:
                api = kube.api()
                try:
                    await kube.apply_crds(api)
                    for mode in ("Controller", "DLedger"):
                        rows += mode_rows(mode, await failovers(kube, api, workdir, mode))
                    for groups in SIZES:
                        measured, steady, setup = await idle_rate(kube, api, groups, log)
                        rows.append(Row(NAME, f"API requests/s, {groups} idle groups", measured,
                                        "req/s", note=f"{WINDOW:.0f} s window with a resync;"
                                                      f" audit log ({setup} requests while"
                                                      " creating the groups)"))
                        rows.append(Row(NAME, f"API requests/s, {groups} idle groups, with"
                                              " re-applies", steady, "req/s",
                                        "< 2 req/s at 100 groups" if groups == 100 else "",
                                        note=f"+ every child re-applied once per"
                                             f" {REAPPLY:.0f} s"))
                finally:
                    await api.close()
        finally:
            os.environ.pop("MQ_KUBE_APISERVER_ARGS", None)
    return rows


def mode_rows(mode: str, out: dict[str, Any]) -> list[Row]:
    rows = []
    setup = "real control plane; follow interval 2 s, poll 0.2 s, resync 30 s"
    if mode == "Controller":
        rows.append(Row(NAME, "kubectl apply -> BrokerGroup Ready=True", out["apply_to_ready"],
                        "s", note="Controller (1 name server) + 3-replica group, processes"
                                  " started by the node agent"))
        rows.append(Row(NAME, "last pod Ready -> BrokerGroup Ready=True",
                        out["last_pod_to_ready"], "s", "< 1 s", note=setup))
    for key, what in (("to_status", "status.masterPod"), ("to_label", "role=master label")):
        values = out[key]
        if not values:
            continue
        rows.append(Row(NAME, f"{mode}: election -> {what}, p50", statistics.median(values),
                        "s", "< 0.5 s" if key == "to_status" else "",
                        note=f"p99 {percentile(values, 0.99):.3f} s, n={len(values)}"))
    if out["election"]:
        rows.append(Row(NAME, f"{mode}: master killed -> election, p50",
                        statistics.median(out["election"]), "s",
                        note=f"p99 {percentile(out['election'], 0.99):.3f} s; the brokers'"
                             " own election, for scale"))
    return rows


def rows() -> list[Row]:
    missing = kit_missing()
    if missing:
        return [Row(NAME, "real control plane", None, note=f"skipped: {missing}")]
    return asyncio.run(_main())


if __name__ == "__main__":
    from bench import render_table

    print(render_table(rows()))
