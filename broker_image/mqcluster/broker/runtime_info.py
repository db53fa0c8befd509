"""GET_BROKER_RUNTIME_INFO's table: a few of RocketMQ's keys, values as strings."""

from __future__ import annotations

import os
import resource
import time

from mqcluster.broker.context import BrokerContext

BROKER_VERSION = "V5_1_4"


def runtime_table(ctx: BrokerContext) -> dict[str, str]:
    store = ctx.store
    cfg = ctx.config
    table: dict[str, object] = {
        "brokerVersionDesc": BROKER_VERSION,
        "brokerName": cfg.brokerName,
        "brokerId": cfg.brokerId,
        "brokerRole": cfg.brokerRole.value,
        "clusterName": cfg.brokerClusterName,
        "brokerAddr": ctx.addresses.broker,
        "haServerAddr": ctx.addresses.ha,
        "grpcServerAddr": ctx.addresses.grpc or "",
        "flushDiskType": cfg.flushDiskType.value,
        "commitLogMinOffset": store.commitlog_min_offset,
        "commitLogMaxOffset": store.commitlog_max_offset,
        "commitLogFlushedOffset": store.flushed_offset,
        "commitLogFlushRounds": store.flush_rounds,
        "dispatchBehindBytes": store.dispatch_behind_bytes,
        "topicNums": len(store.topics.table),
        "queueNums": len(store.queues()),
        "bootTimestamp": int(ctx.started_at * 1000),
        "runtime": f"{int(time.time() - ctx.started_at)}s",
        "pid": os.getpid(),
        "maxRssKiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    return {k: str(v) for k, v in table.items()}
