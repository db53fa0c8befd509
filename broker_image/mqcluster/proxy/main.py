"""``mqproxy -c proxy.conf``: run the proxy until SIGTERM (drains first) or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from mqcluster.common.config import ConfigError, build_config, load_properties
from mqcluster.proxy.config import ProxyConfig
from mqcluster.proxy.server import start_proxy


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mqproxy",
                                description="gRPC proxy (RocketMQ 5 cluster mode) for a cluster")
    p.add_argument("-c", "--configFile", required=True, help="proxy config file (key=value)")
    p.add_argument("--logLevel", default="INFO", help="log level (default INFO)")
    return p


async def serve(config: ProxyConfig) -> None:
    stop = asyncio.Event()
    terminated = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stop.set)

    def on_term() -> None:
        terminated.set()
        stop.set()

    loop.add_signal_handler(signal.SIGTERM, on_term)
    proxy = await start_proxy(config)
    try:
        serves = config.brokerName or "every group"
        print(f"The Proxy boot success. serving {serves}, address {proxy.address}", flush=True)
        await stop.wait()
        if terminated.is_set() and config.drainMs:
            # A rolling update: calls in flight finish, clients move on GOAWAY.
            await proxy.drain(config.drainMs / 1000)
    finally:
        await proxy.stop()


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.logLevel).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = build_config(ProxyConfig, load_properties(args.configFile), args.configFile)
        asyncio.run(serve(config))
    except ConfigError as exc:
        print(f"mqproxy: {exc}", file=sys.stderr)
        sys.exit(1)
    except OSError as exc:
        print(f"mqproxy: cannot start: {exc}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
