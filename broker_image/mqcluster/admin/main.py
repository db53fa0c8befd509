"""``mqadmin <subcommand> ...``: RocketMQ's admin tool names and flags.

Tables on stdout (``--json`` for scripts); every failure is one line on
stderr and a non-zero exit status (1 for errors, 2 for bad usage).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Sequence

from mqcluster.admin import commands, ops
from mqcluster.admin.commands import AdminError, Report
from mqcluster.admin.format import dump_json
from mqcluster.auth.credentials import Credentials
from mqcluster.client.credentials import remoting_signer
from mqcluster.protocol.broker import CreateTopicRequestHeader
from mqcluster.wire.rpc import RpcClient

Runner = Callable[[argparse.Namespace], Awaitable[Report]]


def _bool(value: str) -> bool:
    low = value.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def _namesrv(args: argparse.Namespace, required: bool = True) -> str | None:
    value: str | None = args.namesrvAddr or os.environ.get("NAMESRV_ADDR")
    if required and not value:
        raise AdminError("no name server: give -n <namesrvAddr> or set NAMESRV_ADDR")
    return value


async def _cluster_list(a: argparse.Namespace) -> Report:
    return await commands.cluster_list(_namesrv(a) or "", a.clusterName)


async def _topic_list(a: argparse.Namespace) -> Report:
    return await commands.topic_list(_namesrv(a) or "")


async def _topic_route(a: argparse.Namespace) -> Report:
    return await commands.topic_route(_namesrv(a) or "", a.topic)


async def _update_topic(a: argparse.Namespace) -> Report:
    header = CreateTopicRequestHeader(
        topic=a.topic,
        readQueueNums=a.readQueueNums,
        writeQueueNums=a.writeQueueNums,
        perm=a.perm,
        order=a.order,
        attributes=a.attributes,
    )
    return await commands.update_topic(
        header,
        broker_addr=a.brokerAddr,
        cluster=a.clusterName,
        namesrv=_namesrv(a, required=False),
    )


async def _controller_meta(a: argparse.Namespace) -> Report:
    return await commands.get_controller_metadata(a.controllerAddress)


async def _sync_state_set(a: argparse.Namespace) -> Report:
    return await commands.get_sync_state_set(
        a.controllerAddress, a.brokerName, a.clusterName, _namesrv(a, required=False)
    )


async def _broker_epoch(a: argparse.Namespace) -> Report:
    return await commands.get_broker_epoch(_namesrv(a) or "", a.brokerName, a.clusterName)


async def _elect_master(a: argparse.Namespace) -> Report:
    return await commands.elect_master(a.controllerAddress, a.clusterName, a.brokerName, a.brokerId)


async def _targets(a: argparse.Namespace) -> list[str]:
    return await commands.broker_targets(a.brokerAddr, a.clusterName,
                                         _namesrv(a, required=False))


async def _update_sub_group(a: argparse.Namespace) -> Report:
    group = {
        "groupName": a.groupName, "consumeEnable": a.consumeEnable,
        "consumeFromMinEnable": a.consumeFromMinEnable,
        "consumeBroadcastEnable": a.consumeBroadcastEnable,
        "consumeMessageOrderly": a.consumeMessageOrderly, "retryQueueNums": a.retryQueueNums,
        "retryMaxTimes": a.retryMaxTimes, "brokerId": a.brokerId,
        "whichBrokerWhenConsumeSlowly": a.whichBrokerWhenConsumeSlowly,
        "notifyConsumerIdsChangedEnable": a.notifyConsumerIdsChanged,
    }
    return await ops.update_sub_group(await _targets(a), group)


async def _delete_topic(a: argparse.Namespace) -> Report:
    return await ops.delete_topic(_namesrv(a) or "", a.clusterName, a.topic)


async def _broker_status(a: argparse.Namespace) -> Report:
    return await ops.broker_status(await _targets(a))


async def _get_broker_config(a: argparse.Namespace) -> Report:
    return await ops.get_broker_config(await _targets(a))


async def _update_broker_config(a: argparse.Namespace) -> Report:
    return await ops.update_broker_config(await _targets(a), a.key, a.value)


async def _consumer_progress(a: argparse.Namespace) -> Report:
    return await ops.consumer_progress(_namesrv(a) or "", a.groupName, a.topic)


async def _wipe_write_perm(a: argparse.Namespace) -> Report:
    return await ops.write_perm(_namesrv(a) or "", a.brokerName, add=False)


async def _add_write_perm(a: argparse.Namespace) -> Report:
    return await ops.write_perm(_namesrv(a) or "", a.brokerName, add=True)


async def _query_msg_by_id(a: argparse.Namespace) -> Report:
    return await ops.query_msg_by_id(a.msgId)


async def _producer_connection(a: argparse.Namespace) -> Report:
    return await ops.connections(_namesrv(a) or "", a.producerGroup, a.topic, producer=True)


async def _consumer_connection(a: argparse.Namespace) -> Report:
    return await ops.connections(_namesrv(a) or "", a.consumerGroup, None, producer=False)


async def _dledger_transfer(a: argparse.Namespace) -> Report:
    return await ops.dledger_transfer_leadership(a.brokerAddr, a.peerId)


async def _dledger_status(a: argparse.Namespace) -> Report:
    return await ops.dledger_status(a.brokerAddr, a.clusterName, _namesrv(a, required=False))


async def _clean_broker_metadata(a: argparse.Namespace) -> Report:
    return await ops.clean_broker_metadata(a.controllerAddress, a.clusterName, a.brokerName,
                                           a.brokerIds, a.cleanLivingBroker)


def _add_ops(add: Callable[[str, str, Runner], argparse.ArgumentParser]) -> None:
    def broker_or_cluster(sp: argparse.ArgumentParser) -> None:
        target = sp.add_mutually_exclusive_group(required=True)
        target.add_argument("-b", "--brokerAddr", help="this broker")
        target.add_argument("-c", "--clusterName", help="every master of this cluster")

    sp = add("updateSubGroup", "Create or update a subscription group", _update_sub_group)
    broker_or_cluster(sp)
    sp.add_argument("-g", "--groupName", required=True)
    sp.add_argument("-s", "--consumeEnable", type=_bool, default=True, metavar="true|false")
    sp.add_argument("-m", "--consumeFromMinEnable", type=_bool, default=True,
                    metavar="true|false")
    sp.add_argument("-d", "--consumeBroadcastEnable", type=_bool, default=True,
                    metavar="true|false")
    sp.add_argument("-o", "--consumeMessageOrderly", type=_bool, default=False,
                    metavar="true|false")
    sp.add_argument("-q", "--retryQueueNums", type=int, default=1)
    sp.add_argument("-r", "--retryMaxTimes", type=int, default=16)
    sp.add_argument("-i", "--brokerId", type=int, default=0)
    sp.add_argument("-w", "--whichBrokerWhenConsumeSlowly", type=int, default=1)
    sp.add_argument("-a", "--notifyConsumerIdsChanged", type=_bool, default=True,
                    metavar="true|false")

    sp = add("deleteTopic", "Delete a topic from a cluster and the name servers", _delete_topic)
    sp.add_argument("-t", "--topic", required=True)
    sp.add_argument("-c", "--clusterName", required=True)

    for name, help_, runner in (
        ("brokerStatus", "Show a broker's runtime status", _broker_status),
        ("getBrokerConfig", "Show a broker's configuration", _get_broker_config),
    ):
        broker_or_cluster(add(name, help_, runner))

    sp = add("updateBrokerConfig", "Change a broker config key that needs no restart",
             _update_broker_config)
    broker_or_cluster(sp)
    sp.add_argument("-k", "--key", required=True)
    sp.add_argument("-v", "--value", required=True)

    sp = add("consumerProgress", "Show a consumer group's offsets and lag", _consumer_progress)
    sp.add_argument("-g", "--groupName", required=True)
    sp.add_argument("-t", "--topic")

    for name, help_, runner in (
        ("wipeWritePerm", "Take the write permission of a broker group away", _wipe_write_perm),
        ("addWritePerm", "Give a broker group its write permission back", _add_write_perm),
    ):
        add(name, help_, runner).add_argument("-b", "--brokerName", required=True)

    sp = add("queryMsgById", "Show a message by its offset message id", _query_msg_by_id)
    sp.add_argument("-i", "--msgId", required=True)

    sp = add("producerConnection", "List the producers connected for a topic",
             _producer_connection)
    sp.add_argument("-g", "--producerGroup", required=True)
    sp.add_argument("-t", "--topic", required=True)

    sp = add("consumerConnection", "List the consumers of a group", _consumer_connection)
    sp.add_argument("-g", "--consumerGroup", required=True)

    sp = add("dledgerStatus", "Show the Raft term, role, commit index and ledger end of "
             "DLedger-mode replicas", _dledger_status)
    broker_or_cluster(sp)

    sp = add("dledgerTransferLeadership", "Ask a DLedger leader to hand leadership to a "
             "caught-up peer", _dledger_transfer)
    sp.add_argument("-b", "--brokerAddr", required=True, help="the leader's broker address")
    sp.add_argument("-p", "--peerId", required=True, help="dLegerSelfId of the new leader")

    sp = add("cleanBrokerMetadata", "Remove a broker group's replicas from the controller",
             _clean_broker_metadata)
    sp.add_argument("-a", "--controllerAddress", required=True)
    sp.add_argument("-bn", "--brokerName", required=True)
    sp.add_argument("-b", "--brokerIds", help="ids to remove, 'id1;id2' (default: all)")
    sp.add_argument("-c", "--clusterName")
    sp.add_argument("-l", "--cleanLivingBroker", action="store_true",
                    help="also remove replicas that are alive")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-n", "--namesrvAddr", help="name server address list, eg '127.0.0.1:9876;127.0.0.2:9876'"
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    common.add_argument("--accessKey", help="ACL 2.0 user (access key) that signs every request")
    common.add_argument("--secretKey", help="the user's secret key (password)")

    p = argparse.ArgumentParser(prog="mqadmin", description="mqcluster admin tool")
    sub = p.add_subparsers(dest="command", required=True, metavar="<command>")

    def add(name: str, help_: str, runner: Runner) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_, parents=[common])
        sp.set_defaults(run=runner)
        return sp

    sp = add("clusterList", "List the brokers of every cluster", _cluster_list)
    sp.add_argument("-c", "--clusterName", help="only this cluster")

    add("topicList", "List every topic the name servers know", _topic_list)

    sp = add("topicRoute", "Show the route of a topic", _topic_route)
    sp.add_argument("-t", "--topic", required=True)
    sp.add_argument("-l", "--list", action="store_true", help="list format (the default)")

    sp = add("updateTopic", "Create or update a topic on brokers", _update_topic)
    target = sp.add_mutually_exclusive_group(required=True)
    target.add_argument("-b", "--brokerAddr", help="create the topic on this broker")
    target.add_argument("-c", "--clusterName", help="create the topic on every master of a cluster")
    sp.add_argument("-t", "--topic", required=True)
    sp.add_argument("-r", "--readQueueNums", type=int, default=8)
    sp.add_argument("-w", "--writeQueueNums", type=int, default=8)
    sp.add_argument("-p", "--perm", type=int, default=6, choices=[2, 4, 6])
    sp.add_argument("-o", "--order", type=_bool, default=False, metavar="true|false")
    sp.add_argument("-a", "--attributes", help="attributes, eg '+message.type=NORMAL'")

    sp = add(
        "getControllerMetaData",
        "Show the controller group and its active controller",
        _controller_meta,
    )
    sp.add_argument("-a", "--controllerAddress", required=True)

    for name, help_, runner, needs_controller in (
        ("getSyncStateSet", "Show the SyncStateSet of broker groups", _sync_state_set, True),
        (
            "getBrokerEpoch",
            "Show the epoch entries of the brokers of a group",
            _broker_epoch,
            False,
        ),
    ):
        sp = add(name, help_, runner)
        if needs_controller:
            sp.add_argument("-a", "--controllerAddress", required=True)
        which = sp.add_mutually_exclusive_group(required=True)
        which.add_argument("-b", "--brokerName")
        which.add_argument("-c", "--clusterName")
        sp.add_argument("-i", "--interval", type=float, help="repeat every INTERVAL seconds")

    # RocketMQ 5.1.1+ (ReElectMasterSubCommand): -b is the broker id, -bn the group.
    sp = add("electMaster", "Elect a broker of a group as its master", _elect_master)
    sp.add_argument("-a", "--controllerAddress", required=True)
    sp.add_argument("-c", "--clusterName", required=True)
    sp.add_argument("-bn", "--brokerName", required=True)
    sp.add_argument("-b", "--brokerId", type=int, required=True,
                    help="id of the broker to elect (as RocketMQ's -b)")
    _add_ops(add)
    return p


def _print(report: Report, as_json: bool) -> None:
    out = dump_json(report.data) if as_json else report.text
    if out:
        print(out, flush=True)


async def run(args: argparse.Namespace) -> int:
    interval = getattr(args, "interval", None)
    while True:
        report = await args.run(args)
        _print(report, args.json)
        for err in report.errors:
            _error(args.command, err)
        if not interval:
            return 1 if report.errors else 0
        await asyncio.sleep(interval)


def _error(command: str, message: object) -> None:
    text = " ".join(str(message).split()) or "failed"
    print(f"mqadmin {command}: {text}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if bool(args.accessKey) != bool(args.secretKey):
        parser.error("--accessKey and --secretKey go together")
    if args.accessKey:
        RpcClient.process_signer = remoting_signer(Credentials(args.accessKey, args.secretKey))
    try:
        code = asyncio.run(run(args))
    except AdminError as exc:
        _error(args.command, exc)
        code = 1
    except KeyboardInterrupt:
        code = 130
    except Exception as exc:
        _error(args.command, f"{type(exc).__name__}: {exc}")
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
