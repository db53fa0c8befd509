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

from mqcluster.admin import commands
from mqcluster.admin.broker_protocol import CreateTopicRequestHeader
from mqcluster.admin.commands import AdminError, Report
from mqcluster.admin.format import dump_json

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


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-n", "--namesrvAddr", help="name server address list, eg '127.0.0.1:9876;127.0.0.2:9876'"
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")

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
    args = build_parser().parse_args(argv)
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
