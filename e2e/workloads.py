"""Manifests the e2e tests apply: the groups, and the official client as Jobs."""

from __future__ import annotations

import json

from e2e.kube import Images

PRODUCER = r'''
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, Message, Producer
endpoint, topic, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
p = Producer(ClientConfiguration(endpoint, Credentials()), (topic,))
p.startup()
end, n = time.time() + seconds, 0
while time.time() < end:
    m = Message()
    m.topic, m.body, m.keys = topic, f"k{n}".encode(), f"k{n}"
    try:
        p.send(m)
        print(json.dumps({"acked": f"k{n}", "t": time.time()}), flush=True)
    except Exception:
        print(json.dumps({"failed": f"k{n}"}), flush=True)
    n += 1
p.shutdown()
'''

CONSUMER = r'''
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
endpoint, topic, group, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
c = SimpleConsumer(ClientConfiguration(endpoint, Credentials()), group,
                   {topic: FilterExpression("*")}, await_duration=2)
c.startup()
end = time.time() + seconds
while time.time() < end:
    try:
        for m in c.receive(32, 15):
            print(json.dumps({"received": m.body.decode()}), flush=True)
            c.ack(m)
    except Exception:
        time.sleep(0.2)
c.shutdown()
'''


def controller(images: Images) -> str:
    return json.dumps({
        "apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
        "metadata": {"name": "mqc"},
        "spec": {"replicas": 3, "deployment": "Standalone", "image": images.broker_ref(),
                 "storage": {"size": "1Gi"}},
    })


def broker_group(name: str, mode: str, images: Images, replicas: int = 3) -> str:
    spec: dict[str, object] = {
        "brokerName": name, "clusterName": "E2ECluster", "mode": mode, "replicas": replicas,
        "controllerRef": {"name": "mqc"}, "image": images.broker, "version": images.tag,
        "storage": {"size": "1Gi"},
    }
    if mode == "Controller":
        spec.update(allAckInSyncStateSet=True, inSyncReplicas=2, minInSyncReplicas=1)
    return json.dumps({"apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup",
                       "metadata": {"name": name}, "spec": spec})


def client_job(name: str, images: Images, script: str, *args: str) -> str:
    return json.dumps({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "client", "image": images.broker_ref(),
                            "command": ["python", "-c", script, *args]}],
        }}},
    })


def history(log: str) -> tuple[list[str], list[float], list[str], set[str]]:
    """(acked keys, ack times, failed keys, received keys) from the Jobs' JSON lines."""
    acked: list[str] = []
    times: list[float] = []
    failed: list[str] = []
    received: set[str] = set()
    for line in log.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # the client library's own log lines
        if "acked" in rec:
            acked.append(rec["acked"])
            times.append(rec["t"])
        elif "failed" in rec:
            failed.append(rec["failed"])
        elif "received" in rec:
            received.add(rec["received"])
    return acked, times, failed, received
