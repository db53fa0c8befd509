"""The product on a real Kubernetes API server (kind): install, failover, upgrade,
migration. Each check has an emulator-based twin that runs in CI (e2e/README.md)."""

from __future__ import annotations

import itertools
import time

from e2e.kube import Images, Kube, wait_for
from e2e.workloads import (
    CONSUMER,
    PRODUCER,
    broker_group,
    client_job,
    controller,
    history,
)

TOPIC = "E2ETopic"


def master_pod(kube: Kube, group: str) -> str | None:
    pod: str | None = kube.get("brokergroup", group).get("status", {}).get("masterPod")
    return pod


def service_pods(kube: Kube, service: str) -> set[str]:
    ep = kube.get("endpoints", service)
    return {a["targetRef"]["name"] for s in ep.get("subsets", [])
            for a in s.get("addresses", []) if a.get("targetRef")}


def setup_group(kube: Kube, images: Images, name: str, mode: str) -> str:
    kube.apply(controller(images))
    kube.apply(broker_group(name, mode, images))
    master = wait_for(f"{name} to elect a master", lambda: master_pod(kube, name), 600)
    kube.kubectl("exec", master, "--", "mqadmin", "updateTopic", "-b", "127.0.0.1:10911",
                 "-t", TOPIC, timeout=60)
    return str(master)


def run_job(kube: Kube, name: str, manifest: str, timeout: float) -> str:
    kube.apply(manifest)
    wait_for(f"job {name} to finish", lambda: kube.get("job", name).get("status", {})
             .get("succeeded"), timeout)
    return kube.kubectl("logs", f"job/{name}")


def test_the_master_is_in_status_and_behind_the_service(kube: Kube, images: Images) -> None:
    master = setup_group(kube, images, "e2e-a", "Controller")
    wait_for("the client Service to select the master",
             lambda: service_pods(kube, "e2e-a") == {master}, 120)


def test_deleting_the_master_pod_elects_another(kube: Kube, images: Images) -> None:
    old = setup_group(kube, images, "e2e-a", "Controller")
    before = len(kube.events("MasterChanged"))
    started = time.monotonic()
    kube.kubectl("delete", "pod", old, "--wait=false")
    new = wait_for("a new master", lambda: (m := master_pod(kube, "e2e-a")) not in (None, old)
                   and m, 120)
    wait_for("a MasterChanged Event", lambda: len(kube.events("MasterChanged")) > before, 60)
    wait_for("the Service to follow", lambda: service_pods(kube, "e2e-a") == {new}, 60)
    print(f"master {old} -> {new} in status after {time.monotonic() - started:.1f} s")


def test_a_rolling_upgrade_loses_no_acknowledged_message(kube: Kube, images: Images) -> None:
    setup_group(kube, images, "e2e-a", "Controller")
    endpoint = "e2e-a:8081"
    kube.apply(client_job("e2e-producer", images, PRODUCER, endpoint, TOPIC, "240"))
    time.sleep(20)  # the producer is running before the roll starts
    kube.kubectl("patch", "brokergroup", "e2e-a", "--type=merge",
                 "-p", f'{{"spec": {{"version": "{images.upgrade_tag}"}}}}')

    def upgraded() -> bool:
        running = kube.kubectl("get", "pods", "-l", "app.kubernetes.io/instance=e2e-a", "-o",
                               "jsonpath={.items[*].spec.containers[0].image}").split()
        return bool(running) and all(i == images.broker_ref(images.upgrade_tag)
                                     for i in running)

    wait_for("every replica on the new image", upgraded, 900, 5)
    wait_for("the producer to finish", lambda: kube.get("job", "e2e-producer")
             .get("status", {}).get("succeeded"), 600, 5)
    log = kube.kubectl("logs", "job/e2e-producer")
    acked, times, failed, _ = history(log)
    consumed = run_job(kube, "e2e-consumer",
                       client_job("e2e-consumer", images, CONSUMER, endpoint, TOPIC, "e2e", "120"),
                       600)
    _, _, _, received = history(consumed)
    lost = set(acked) - received
    gaps = [b - a for a, b in itertools.pairwise(sorted(times))]
    print(f"acked {len(acked)}, failed sends {len(failed)}, longest gap between acks "
          f"{max(gaps, default=0.0):.2f} s")
    assert not lost, f"{len(lost)} acknowledged messages lost: {sorted(lost)[:10]}"


def test_a_dledger_group_migrates_to_controller_mode(kube: Kube, images: Images) -> None:
    setup_group(kube, images, "e2e-d", "DLedger")
    kube.kubectl("patch", "brokergroup", "e2e-d", "--type=merge",
                 "-p", '{"spec": {"mode": "Controller"}}')
    done = wait_for("the migration to complete", lambda: (c := kube.condition(
        "brokergroup", "e2e-d", "Migrating")) and c.get("reason") == "Completed", 1200, 5)
    assert done
    master = wait_for("a master in controller mode", lambda: master_pod(kube, "e2e-d"), 300)
    namesrv = "$(grep ^namesrvAddr= /etc/mqcluster/broker.conf | cut -d= -f2)"
    topics = kube.kubectl("exec", str(master), "--", "sh", "-c",
                          f"mqadmin topicList -n {namesrv}", timeout=60)
    assert TOPIC in topics
