"""What this broker tells the name servers, and how it keeps telling them."""

from __future__ import annotations

from dataclasses import replace

from mqcluster.broker.context import BrokerContext
from mqcluster.client.namesrv import BrokerRegistrar, NamesrvClient, RegisterOutcome
from mqcluster.protocol.namesrv import (
    PERM_PRIORITY,
    BrokerRegistration,
    DataVersion,
    TopicConfig,
)


def registration_of(ctx: BrokerContext) -> BrokerRegistration:
    cfg = ctx.config
    manager = ctx.store.topics
    topics = {
        name: TopicConfig(
            topicName=name,
            readQueueNums=tc.readQueueNums,
            writeQueueNums=tc.writeQueueNums,
            perm=(tc.perm & cfg.brokerPermission) | (tc.perm & PERM_PRIORITY),
            topicFilterType=tc.topicFilterType,
            topicSysFlag=tc.topicSysFlag,
            order=tc.order,
        )
        for name, tc in manager.table.items()
    }
    version = manager.data_version
    return BrokerRegistration(
        clusterName=cfg.brokerClusterName,
        brokerName=cfg.brokerName,
        brokerAddr=ctx.addresses.broker,
        brokerId=ctx.role.broker_id,
        haServerAddr=ctx.addresses.ha,
        proxyAddr=ctx.addresses.grpc or "",
        heartbeatTimeoutMillis=cfg.brokerNotActiveTimeoutMillis,
        enableActingMaster=cfg.enableSlaveActingMaster,
        topicConfigTable=topics,
        dataVersion=DataVersion(timestamp=version.timestamp, counter=version.counter),
    )


def start_registrar(ctx: BrokerContext) -> BrokerRegistrar | None:
    """Register with every ``namesrvAddr`` now and every ``registerNameServerPeriod``."""
    addrs = ctx.config.namesrv_addrs
    if not addrs:
        return None
    client = NamesrvClient(addrs, timeout=ctx.config.registerBrokerTimeoutMills / 1000.0)

    def remember_master(outcomes: list[RegisterOutcome]) -> None:
        # Master-slave mode learns its master from the name servers; the other modes
        # are told by the controller or by Raft.
        if ctx.config.enableControllerMode or ctx.config.enableDLegerCommitLog:
            return
        for out in outcomes:
            if out.result is not None and out.result.masterAddr:
                ctx.set_role(replace(ctx.role, master_addr=out.result.masterAddr))

    registrar = BrokerRegistrar(
        client,
        lambda: registration_of(ctx),
        interval=ctx.config.registerNameServerPeriod / 1000.0,
        on_outcomes=remember_master,
    )
    ctx.topic_listeners.append(registrar.trigger)
    ctx.topic_publishers.append(registrar.registered)
    ctx.role_listeners.append(lambda _old, _new: registrar.trigger())
    registrar.start()
    return registrar
