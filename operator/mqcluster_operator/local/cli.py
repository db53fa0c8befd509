"""``mqcluster local up|status|down -f MANIFEST...``: the manifests as local processes."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from .inspect import group_state
from .plan import PlanError, plan, read_manifests
from .runner import BootError, LocalCluster, Running
from .watch import watch

DEFAULT_STATE = ".mqcluster-local"


def random_prefix() -> str:
    """A 127.x.y network of its own, so several local clusters can coexist."""
    return f"127.{random.randint(16, 250)}.{random.randint(1, 250)}"


def load(files: Sequence[str]) -> list[object]:
    docs: list[object] = []
    for f in files:
        try:
            docs += [d for d in yaml.safe_load_all(Path(f).read_text()) if d]
        except (OSError, yaml.YAMLError) as exc:
            raise PlanError(f"{f}: {exc}") from None
    return docs


def up(args: argparse.Namespace) -> int:
    state = Path(args.state_dir)
    cluster = LocalCluster(state)
    if cluster.processes:
        print(f"a local cluster is already up in {state} (mqcluster local down first)")
        return 1
    processes = plan(read_manifests(load(args.file)), args.ip_prefix or random_prefix(),
                     state / "data")
    try:
        cluster.up(processes, print)
    except BootError as exc:
        print(f"mqcluster local up: {exc}", file=sys.stderr)
        cluster.down()
        return 1
    print(f"up: {len(processes)} processes; `mqcluster local status` shows the groups")
    return 0


def status(args: argparse.Namespace) -> int:
    cluster = LocalCluster(Path(args.state_dir))
    if not cluster.processes:
        print("no local cluster is up")
        return 1
    if args.watch:
        return watch_status(cluster, args)
    for p in cluster.processes:
        print(f"{p.name:<14} {p.kind:<10} {p.ip:<16} pid {p.pid:<8} "
              f"{'alive' if p.alive else 'DEAD'}")
    groups: dict[str, list[Running]] = {}
    for p in cluster.processes:
        if p.kind == "broker":
            groups.setdefault(p.group, []).append(p)
    for group, replicas in groups.items():
        try:
            st = asyncio.run(group_state(replicas))
        except Exception as exc:
            print(f"group {group}: cannot ask who leads: {exc}")
            continue
        print(f"group {group} ({st.mode}): master {st.master or 'none'}, "
              f"{'epoch' if st.mode == 'Controller' else 'term'} {st.epoch}, "
              f"in sync: {', '.join(st.in_sync) or 'none'}")
    return 0


def watch_status(cluster: LocalCluster, args: argparse.Namespace) -> int:
    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a watch ends
        asyncio.run(watch(cluster.processes, args.interval, args.iterations, write,
                          clear=sys.stdout.isatty()))
    return 0


def positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def down(args: argparse.Namespace) -> int:
    cluster = LocalCluster(Path(args.state_dir))
    if not cluster.processes:
        print("no local cluster is up")
        return 0
    n = len(cluster.processes)
    killed = cluster.down()
    print(f"down: {n} processes stopped" + (f" ({', '.join(killed)} killed)" if killed else ""))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mqcluster", description="mqcluster tools")
    sub = p.add_subparsers(dest="area", required=True)
    local = sub.add_parser("local", help="run Controller/BrokerGroup manifests as local processes")
    actions = local.add_subparsers(dest="action", required=True)
    for name, fn, helptext in (("up", up, "start the processes the manifests describe"),
                               ("status", status, "processes and who leads each group"),
                               ("down", down, "stop every process")):
        a = actions.add_parser(name, help=helptext)
        a.add_argument("--state-dir", default=DEFAULT_STATE,
                       help=f"where pids, configs, logs and data live (default {DEFAULT_STATE})")
        if name == "up":
            a.add_argument("-f", "--file", action="append", required=True,
                           help="a manifest file (repeat for several)")
            a.add_argument("--ip-prefix", help="127.x.y network to use (default: a random one)")
        if name == "status":
            a.add_argument("--watch", action="store_true",
                           help="a live view of the groups: master, epoch, in-sync replicas, "
                                "each replica's role and offset, message rates (Ctrl-C stops)")
            a.add_argument("--interval", type=positive, default=1.0,
                           help="seconds between two views with --watch (default 1)")
            a.add_argument("--iterations", type=int, default=None,
                           help="with --watch: stop after this many views (default: never)")
        a.set_defaults(fn=fn)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        sys.exit(args.fn(args))
    except PlanError as exc:
        print(f"mqcluster: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
