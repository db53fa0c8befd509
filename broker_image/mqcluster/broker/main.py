"""``mqbroker -c broker.conf [-n namesrv] [--enable-proxy]``: run one broker.

The gRPC client endpoint (RocketMQ's Proxy in Local mode) starts by default
(``enableProxy=true``): the design makes mqbroker the client endpoint, and
the official clients must work against it without extra flags.
``--enable-proxy`` is accepted as RocketMQ's start scripts pass it;
``enableProxy=false`` in the config turns the endpoint off.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from mqcluster.broker.config import BrokerConfig, load_broker_config
from mqcluster.broker.server import BrokerServer
from mqcluster.common import event_loop, gc_policy
from mqcluster.common.config import ConfigError
from mqcluster.store.errors import StoreError

PROG = "mqbroker"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG, description="Run a message broker.")
    p.add_argument("-c", "--configFile", dest="config", help="broker properties file")
    p.add_argument("-n", "--namesrvAddr", dest="namesrv", help="name servers, 'a:9876;b:9876'")
    p.add_argument(
        "--enable-proxy", action="store_true", help="serve the gRPC client endpoint (default)"
    )
    p.add_argument("-p", "--printConfigItem", action="store_true", help="print config and exit")
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return p.parse_args(argv)


def overrides_from(args: argparse.Namespace) -> dict[str, str]:
    out: dict[str, str] = {}
    if args.namesrv:
        out["namesrvAddr"] = args.namesrv
    if args.enable_proxy:
        out["enableProxy"] = "true"
    return out


async def serve(cfg: BrokerConfig) -> None:
    server = BrokerServer(cfg)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.start()
        gc_policy.freeze_startup()
        ctx = server.context
        print(
            f"The broker[{cfg.brokerName}, {ctx.addresses.broker}] boot success. "
            f"serializeType=JSON and name server is {cfg.namesrvAddr or 'none'}",
            flush=True,
        )
        await stop.wait()
        logging.getLogger(PROG).info("shutting down")
    finally:
        await server.stop()
    print(f"The broker[{cfg.brokerName}] shutdown OK", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        cfg = load_broker_config(args.config, overrides_from(args))
    except ConfigError as exc:
        print(f"{PROG}: configuration error: {exc}", file=sys.stderr)
        return 2
    if args.printConfigItem:
        for key, value in cfg.model_dump(mode="json").items():
            # An unset value is a comment: fed back as a file, ``key=`` would be an
            # empty name, which is an error.
            print(f"#{key}=" if value is None else f"{key}={value}")
        return 0
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        gc_policy.apply()
        event_loop.run(serve(cfg))
    except (event_loop.EventLoopChoiceError, gc_policy.GcThresholdError) as exc:
        print(f"{PROG}: configuration error: {exc}", file=sys.stderr)
        return 2
    except (OSError, StoreError) as exc:
        print(f"{PROG}: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
