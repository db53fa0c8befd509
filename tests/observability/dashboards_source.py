"""The source of the chart's Grafana dashboards (charts/mqcluster-operator/dashboards/):
edit the panels here, then write the JSON with

    .venv/bin/python -m tests.observability.dashboards_source

test_dashboards_source.py fails while the JSON in the chart differs from what this makes.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[2] / "charts" / "mqcluster-operator" / "dashboards"
DS = {"type": "prometheus", "uid": "${datasource}"}
RI = "$__rate_interval"
Obj = dict[str, Any]
Target = tuple[str, str]
"""(PromQL expression, legend)."""


def ds_var() -> Obj:
    return {"name": "datasource", "label": "Data source", "type": "datasource",
            "query": "prometheus", "current": {}, "hide": 0, "refresh": 1}


def query_var(name: str, label: str, query: str, multi: bool = True) -> Obj:
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": name}, "definition": query,
            "refresh": 2, "includeAll": multi, "multi": multi,
            "allValue": ".*" if multi else None, "current": {}, "sort": 1, "hide": 0}


RED_FROM_ONE = {"fieldConfig": {"defaults": {"unit": "short", "thresholds": {
    "mode": "absolute", "steps": [{"color": "green", "value": None},
                                  {"color": "red", "value": 1}]}}, "overrides": []}}


@dataclass
class Layout:
    """Panels placed left to right in rows of Grafana's 24 columns."""

    panels: list[Obj] = field(default_factory=list)
    x: int = 0
    y: int = 0
    row_h: int = 0

    def add(self, kind: str, title: str, targets: list[Target], w: int = 12, h: int = 8,
            unit: str = "short", desc: str = "", extra: Obj | None = None) -> None:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        table = {"instant": True, "format": "table"} if kind == "table" else {}
        panel: Obj = {
            "id": len(self.panels) + 1, "type": kind, "title": title, "description": desc,
            "datasource": DS, "gridPos": {"x": self.x, "y": self.y, "w": w, "h": h},
            "targets": [{"refId": chr(65 + i), "datasource": DS, "expr": expr,
                         "legendFormat": legend, **table}
                        for i, (expr, legend) in enumerate(targets)],
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {},
        }
        if kind == "timeseries":
            panel["options"] = {"legend": {"displayMode": "table", "placement": "bottom",
                                           "calcs": ["lastNotNull", "max"]},
                                "tooltip": {"mode": "multi"}}
        if kind == "stat":
            panel["options"] = {"reduceOptions": {"calcs": ["lastNotNull"]},
                                "colorMode": "value", "graphMode": "none"}
        panel.update(extra or {})
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)


def dashboard(uid: str, title: str, desc: str, variables: list[Obj], layout: Layout,
              tag: str) -> Obj:
    return {"uid": uid, "title": title, "description": desc, "tags": ["mqcluster", tag],
            "editable": True, "schemaVersion": 39, "version": 1, "refresh": "10s",
            "time": {"from": "now-1h", "to": "now"}, "timezone": "",
            "templating": {"list": variables}, "annotations": {"list": []},
            "panels": layout.panels}


def overview() -> Obj:
    c = 'cluster=~"$cluster"'
    lay = Layout()
    lay.add("stat", "Broker groups", [(
        f"count(count by (cluster, broker) (rocketmq_broker_is_master{{{c}}}))", "groups")],
        w=4, h=4, desc="Broker groups with at least one replica scraped.")
    lay.add("stat", "Groups without a master", [(
        f"count(max by (cluster, broker) (rocketmq_broker_is_master{{{c}}}) == 0) or vector(0)",
        "no master")], w=4, h=4, extra=RED_FROM_ONE,
        desc="Groups whose scraped replicas are all slaves (MQClusterNoMaster fires after 30s).")
    lay.add("stat", "Brokers alive (controller)", [
        ("max(mqcontroller_brokers_alive)", "alive")], w=4, h=4,
        desc="Brokers with a live heartbeat, as the controllers see them.")
    lay.add("stat", "Active controllers", [("sum(mqcontroller_is_leader)", "leaders")],
            w=4, h=4, desc="Controllers that are the Raft leader: 1 is healthy, 0 means no "
                           "quorum.")
    lay.add("stat", "Produce rate", [
        (f"sum(rate(rocketmq_messages_in_total{{{c}}}[{RI}]))", "msg/s")], w=4, h=4)
    lay.add("stat", "Consume rate", [
        (f"sum(rate(rocketmq_messages_out_total{{{c}}}[{RI}]))", "msg/s")], w=4, h=4)
    lay.add("table", "Masters", [
        (f"max by (cluster, broker, broker_id, instance) "
         f"(rocketmq_broker_is_master{{{c}}}) == 1", ""),
        (f"max by (cluster, broker) (rocketmq_broker_master_epoch{{{c}}})", "")],
        desc="The master of each group (broker id, instance) and its master epoch (Raft term "
             "in DLedger mode).")
    lay.add("timeseries", "In-sync replicas", [
        (f"max by (broker) (rocketmq_ha_sync_state_set_size{{{c}}})", "{{broker}} (master)"),
        (f"max by (broker) (mqcontroller_sync_state_set_size{{{c}}})",
         "{{broker}} (controller)"),
        (f"max by (broker) (rocketmq_broker_min_in_sync_replicas{{{c}}})",
         "{{broker}} minInSyncReplicas")],
        desc="SyncStateSet size (controller mode), as the master and the controllers see it; "
             "below minInSyncReplicas writes are refused.")
    lay.add("timeseries", "Produce rate by group", [
        (f"sum by (broker) (rate(rocketmq_messages_in_total{{{c}}}[{RI}]))", "{{broker}}")],
        desc="Messages stored per second (rocketmq-exporter's rocketmq_producer_tps).")
    lay.add("timeseries", "Consume rate by group", [
        (f"sum by (broker) (rate(rocketmq_messages_out_total{{{c}}}[{RI}]))", "{{broker}}")],
        desc="Messages delivered per second (rocketmq-exporter's rocketmq_consumer_tps).")
    lay.add("timeseries", "Consumer lag", [
        (f"max by (group, topic) (rocketmq_group_diff{{{c}}})", "{{group}} / {{topic}}")],
        desc="Messages not yet consumed per consumer group and topic.")
    lay.add("timeseries", "Replica lag", [
        (f"max by (broker, slave) (rocketmq_ha_slave_lag_bytes{{{c}}})",
         "{{broker}} slave {{slave}}")], unit="bytes",
        desc="Commitlog bytes each slave is behind its master.")
    lay.add("timeseries", "Master changes", [
        (f"sum by (broker) (increase(rocketmq_broker_became_master_total{{{c}}}[5m]))",
         "{{broker}}")],
        desc="Replicas that took the master role in the last 5 minutes (failovers and "
             "switchovers).")
    lay.add("timeseries", "Proxies: master known", [
        ("min by (broker) (mqproxy_master_known)", "{{broker}}")],
        desc="Where mqproxy runs: 1 while every proxy of the group knows a master to forward "
             "to.")
    lay.add("timeseries", "Proxies: master moves", [
        ("sum by (broker) (increase(mqproxy_master_changes_total[5m]))", "{{broker}}")],
        desc="Where mqproxy runs: moves to another master in the last 5 minutes.")
    lay.add("timeseries", "Write errors", [
        (f"sum by (broker) (rate(rocketmq_put_errors_total{{{c}}}[{RI}])) or sum by (broker) "
         f"(rate(rocketmq_messages_in_total{{{c}}}[{RI}])) * 0", "{{broker}}")],
        desc="Sends refused or failed per second (0 while none failed).")
    return dashboard("mqcluster-overview", "mqcluster / Cluster overview",
                     "Every broker group: masters, in-sync replicas, rates and lag.",
                     [ds_var(), query_var("cluster", "Cluster",
                                          "label_values(rocketmq_broker_is_master, cluster)")],
                     lay, "overview")


def group() -> Obj:
    g = 'broker="$broker"'
    lay = Layout()
    lay.add("stat", "Master epoch", [(f"max(rocketmq_broker_master_epoch{{{g}}})", "epoch")],
            w=6, h=4, desc="Master epoch (controller mode) or Raft term (DLedger mode); each "
                           "election adds one.")
    lay.add("stat", "In-sync replicas", [
        (f"max(rocketmq_ha_sync_state_set_size{{{g}}})", "members")], w=6, h=4)
    lay.add("stat", "minInSyncReplicas", [
        (f"max(rocketmq_broker_min_in_sync_replicas{{{g}}})", "min")], w=6, h=4)
    lay.add("stat", "Disk used (max)", [
        (f"max(rocketmq_brokeruntime_commitlog_disk_ratio{{{g}}})", "used")], w=6, h=4,
        unit="percentunit")
    lay.add("timeseries", "Role per replica", [
        (f"rocketmq_broker_is_master{{{g}}}", "{{instance}} id {{broker_id}}")],
        desc="1 while the replica is master: a failover shows as the 1 moving to another "
             "replica.")
    lay.add("timeseries", "Failover history", [
        (f"sum by (instance) (increase(rocketmq_broker_became_master_total{{{g}}}[5m]))",
         "{{instance}} became master"),
        (f"max(rocketmq_broker_master_epoch{{{g}}})", "master epoch")],
        desc="Replicas that took the master role (5 min windows) and the master epoch.")
    lay.add("timeseries", "Commitlog offset per replica", [
        (f"rocketmq_commitlog_max_offset{{{g}}}", "{{instance}} max"),
        (f"rocketmq_broker_confirm_offset{{{g}}}", "{{instance}} confirm")], unit="bytes",
        desc="Each replica's commitlog end and the confirm offset (what every SyncStateSet "
             "member has).")
    lay.add("timeseries", "Replica lag (bytes)", [
        (f"rocketmq_ha_slave_lag_bytes{{{g}}}", "slave {{slave}}")], unit="bytes")
    lay.add("timeseries", "Replica lag (seconds)", [
        (f"rocketmq_ha_slave_lag_seconds{{{g}}}", "slave {{slave}}")], unit="s",
        desc="Seconds since each slave last had everything the master had.")
    lay.add("table", "SyncStateSet members", [
        (f"max by (broker_id) (rocketmq_ha_sync_state_set_member{{{g}}})", "")],
        desc="Broker ids in the SyncStateSet, as the master reports it.")
    flush = "rocketmq_store_flush_seconds"
    lay.add("timeseries", "fsync latency", [
        (f"histogram_quantile(0.99, sum by (le, instance) "
         f"(rate({flush}_bucket{{{g}}}[{RI}])))", "{{instance}} p99"),
        (f"sum by (instance) (rate({flush}_sum{{{g}}}[{RI}])) / "
         f"sum by (instance) (rate({flush}_count{{{g}}}[{RI}]))", "{{instance}} mean")],
        unit="s", desc="Duration of commitlog fsync rounds per replica.")
    put = "rocketmq_rpc_latency_put_seconds_bucket"
    lay.add("timeseries", "Send latency", [
        (f"histogram_quantile(0.99, sum by (le) (rate({put}{{{g}}}[{RI}])))", "p99"),
        (f"histogram_quantile(0.5, sum by (le) (rate({put}{{{g}}}[{RI}])))", "p50")],
        unit="s", desc="From a send request to its acknowledgement (replication and fsync "
                       "included).")
    lay.add("timeseries", "Produce and consume rate", [
        (f"sum(rate(rocketmq_messages_in_total{{{g}}}[{RI}]))", "in"),
        (f"sum(rate(rocketmq_messages_out_total{{{g}}}[{RI}]))", "out")])
    lay.add("timeseries", "Consumer lag", [
        (f"max by (group, topic) (rocketmq_group_diff{{{g}}})", "{{group}} / {{topic}}")])
    lay.add("timeseries", "Dispatch behind", [
        (f"rocketmq_dispatch_behind_bytes{{{g}}}", "{{instance}}")], unit="bytes",
        desc="Commitlog bytes not yet in the consume queues.")
    lay.add("timeseries", "Connections", [
        (f"rocketmq_remoting_connections{{{g}}}", "{{instance}}")])
    return dashboard("mqcluster-group", "mqcluster / Broker group",
                     "One broker group in detail: replicas, offsets, lag, failovers, fsync "
                     "latency.",
                     [ds_var(), query_var("broker", "Broker group",
                                          "label_values(rocketmq_broker_is_master, broker)",
                                          multi=False)],
                     lay, "group")


def operator() -> Obj:
    op = "mqcluster_operator"
    lay = Layout()
    lay.add("timeseries", "Reconciles", [
        (f"sum by (resource, result) (rate({op}_reconciles_total[{RI}]))",
         "{{resource}} {{result}}")])
    lay.add("timeseries", "Reconcile duration (p95)", [
        (f"histogram_quantile(0.95, sum by (le, resource) "
         f"(rate({op}_reconcile_seconds_bucket[{RI}])))", "{{resource}}")], unit="s")
    lay.add("timeseries", "Election following (p95)", [
        (f"histogram_quantile(0.95, sum by (le, resource) "
         f"(rate({op}_follow_seconds_bucket[{RI}])))", "{{resource}} pass"),
        (f"histogram_quantile(0.95, sum by (le) (rate({op}_relabel_seconds_bucket[{RI}])))",
         "new master relabelled")], unit="s",
        desc="One following pass, and from learning of a new master to its pod labelled "
             "role=master.")
    lay.add("timeseries", "Master changes seen", [
        (f"sum by (namespace, brokergroup) (increase({op}_master_changes_total[5m]))",
         "{{namespace}}/{{brokergroup}}")])
    lay.add("timeseries", "API requests", [
        (f"sum by (method) (rate({op}_api_requests_total[{RI}]))", "{{method}}")],
        unit="reqps")
    lay.add("timeseries", "API errors", [
        (f"sum by (code) (rate({op}_api_errors_total[{RI}]))", "{{code}}")], unit="reqps",
        desc="Failed API requests by status code; unreachable: no answer at all.")
    lay.add("timeseries", "Objects applied", [
        (f"sum by (kind, result) (rate({op}_objects_applied_total[{RI}]))",
         "{{kind}} {{result}}")])
    lay.add("timeseries", "Probe failures", [
        (f"sum by (namespace, name) (rate({op}_probe_failures_total[{RI}]))",
         "{{namespace}}/{{name}}")],
        desc="Failed attempts to learn a resource's election state.")
    lay.add("table", "Resource conditions", [
        (f"max by (namespace, kind, name, type) ({op}_resource_condition)", "")], w=24,
        desc="The conditions the operator last wrote: 1 True, 0 False, -1 Unknown.")
    return dashboard("mqcluster-operator", "mqcluster / Operator",
                     "The operator: reconciles, election following, API access, resource "
                     "conditions.", [ds_var()], lay, "operator")


def build() -> dict[str, Obj]:
    """Every dashboard, by file name."""
    return {"mqcluster-overview.json": overview(), "mqcluster-group.json": group(),
            "mqcluster-operator.json": operator()}


def render(board: Obj) -> str:
    return json.dumps(board, indent=2) + "\n"


def main() -> None:
    for name, board in build().items():
        (OUT / name).write_text(render(board))
        print(f"wrote {OUT / name}", file=sys.stderr)


if __name__ == "__main__":
    main()
