"""``mqnamesrv -c namesrv.conf [-p port]``: run a name server until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from mqcluster.common import event_loop, gc_policy
from mqcluster.common.config import ConfigError, Properties, build_config, load_properties
from mqcluster.namesrv.config import NamesrvConfig
from mqcluster.namesrv.embedded import (
    EmbeddedController,
    EmbeddedControllerUnavailable,
    build_embedded_controller,
    controller_keys,
)
from mqcluster.namesrv.server import NamesrvServer

log = logging.getLogger("mqcluster.namesrv")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mqnamesrv", description="RocketMQ-style name server")
    p.add_argument("-c", "--configFile", help="name server config file (key=value)")
    p.add_argument("-p", "--listenPort", type=int, help="listen port (default 9876)")
    p.add_argument("--bindAddress", help="address to listen on (default 0.0.0.0)")
    p.add_argument("--logLevel", default="INFO", help="log level (default INFO)")
    return p


def load(args: argparse.Namespace) -> tuple[NamesrvConfig, dict[str, str], str]:
    props = load_properties(args.configFile) if args.configFile else Properties()
    if args.listenPort is not None:
        props["listenPort"] = str(args.listenPort)
    if args.bindAddress is not None:
        props["bindAddress"] = args.bindAddress
    source = args.configFile or "<command line>"
    # the embedded controller's keys are its own to check; a RocketMQ controller key it does
    # not implement (controllerThreadPoolNums...) is warned about here
    others = controller_keys() - set(NamesrvConfig.model_fields)
    own = props.subset(k for k in props if k not in others)
    return build_config(NamesrvConfig, own, source), props, source


async def serve(config: NamesrvConfig, props: dict[str, str], source: str) -> None:
    server = NamesrvServer(config)
    controller: EmbeddedController | None = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if config.enableControllerInNamesrv:
        controller = build_embedded_controller(props, server.registry, server.routes, source=source)
    await server.start()
    controller_started = False
    try:
        if controller is not None:
            await controller.start()
            controller_started = True
        gc_policy.freeze_startup()
        print(
            f"The Name Server boot success. serializeType=JSON, address {server.address}",
            flush=True,
        )
        await stop.wait()
    finally:
        if controller is not None and controller_started:
            await controller.stop()
        await server.stop()


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.logLevel).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config, props, source = load(args)
        gc_policy.apply()
        event_loop.run(serve(config, props, source))
    except (ConfigError, EmbeddedControllerUnavailable, event_loop.EventLoopChoiceError,
            gc_policy.GcThresholdError) as exc:
        print(f"mqnamesrv: {exc}", file=sys.stderr)
        sys.exit(1)
    except OSError as exc:
        print(f"mqnamesrv: cannot start: {exc}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
