"""``mqcontroller -c controller.conf``: run one standalone controller until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from mqcluster.common import event_loop, gc_policy
from mqcluster.common.config import ConfigError
from mqcluster.controller.config import ControllerConfig, load_controller_config
from mqcluster.controller.service import ControllerService
from mqcluster.raft.diskformat import RaftStoreError

log = logging.getLogger("mqcontroller")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="mqcontroller", description="RIP-44 DLedger controller")
    p.add_argument("-c", "--config", help="properties file (RocketMQ key names)")
    p.add_argument(
        "-o", "--option", action="append", default=[], metavar="KEY=VALUE",
        help="override one config key (repeatable)",
    )
    p.add_argument("-p", "--print-config", action="store_true", help="print the config and exit")
    p.add_argument("--log-level", default="INFO")
    return p.parse_args(argv)


async def run(config: ControllerConfig) -> None:
    service = ControllerService(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await service.start()
    gc_policy.freeze_startup()
    print(
        f"mqcontroller {config.controllerDLegerSelfId} started on {service.self_addr}",
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        await service.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    overrides: dict[str, str] = {}
    for opt in args.option:
        key, sep, value = opt.partition("=")
        if not sep:
            print(f"mqcontroller: -o expects KEY=VALUE, got {opt!r}", file=sys.stderr)
            return 2
        overrides[key.strip()] = value.strip()
    try:
        config = load_controller_config(args.config, overrides)
    except ConfigError as exc:
        print(f"mqcontroller: {exc}", file=sys.stderr)
        return 1
    if args.print_config:
        for key, value in config.model_dump().items():
            print(f"{key}={value}")
        return 0
    try:
        gc_policy.apply()
        event_loop.run(run(config))
    except (event_loop.EventLoopChoiceError, gc_policy.GcThresholdError) as exc:
        print(f"mqcontroller: {exc}", file=sys.stderr)
        return 1
    except (OSError, RaftStoreError) as exc:
        print(f"mqcontroller: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
