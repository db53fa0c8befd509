"""``mqraft``: a standalone Raft group member replicating a ``ValueLog``.

    mqraft --id n0 --peers "n0-127.0.0.2:9001;n1-127.0.0.3:9001;n2-127.0.0.4:9001" --store DIR

Serves the Raft protocol and the client requests of ``raft.service`` on its own
peer address; logs role changes. SIGTERM/SIGINT stop it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys

from mqcluster.raft.diskformat import RaftStoreError
from mqcluster.raft.node import RaftRunner, RunnerOptions, parse_peers
from mqcluster.raft.service import ValueLogService
from mqcluster.raft.types import RaftConfig
from mqcluster.raft.valuelog import ValueLog

log = logging.getLogger("mqraft")


def build_parser() -> argparse.ArgumentParser:
    defaults = RaftConfig()
    p = argparse.ArgumentParser(prog="mqraft", description=__doc__.splitlines()[0])
    p.add_argument("--id", required=True, help="this member's id, one of --peers")
    p.add_argument("--peers", required=True, help='DLedger syntax: "n0-host:port;n1-host:port"')
    p.add_argument("--store", required=True, help="directory of the log, hard state, snapshot")
    p.add_argument("--keep", type=int, default=100_000, help="recent values kept for reads")
    p.add_argument("--snapshot-every", type=int, default=50_000, help="entries; 0 = never")
    p.add_argument("--heartbeat-interval", type=float, default=defaults.heartbeat_interval)
    p.add_argument("--max-batch-entries", type=int, default=defaults.max_batch_entries)
    p.add_argument("--max-inflight-appends", type=int, default=defaults.max_inflight_appends)
    p.add_argument("--switch-interval", type=float, default=0.0005,
                   help="sys.setswitchinterval (GIL hand-over), seconds")
    p.add_argument("--leader-fsync", choices=("behind", "inline"), default="behind",
                   help="a leader fsyncs its writes a few ms later, one fsync for all of "
                        "them (behind), or each batch before it goes on (inline)")
    p.add_argument("--log-level", default="INFO")
    return p


async def serve(args: argparse.Namespace) -> int:
    # The fsync thread hands results back to the busy event loop; with the default
    # 5 ms GIL switch interval each hand-over can cost milliseconds of commit latency.
    sys.setswitchinterval(args.switch_interval)
    peers = parse_peers(args.peers)
    values = ValueLog(keep=args.keep)
    config = RaftConfig(
        heartbeat_interval=args.heartbeat_interval,
        max_batch_entries=args.max_batch_entries,
        max_inflight_appends=args.max_inflight_appends,
    )
    runner = RaftRunner(
        args.id, peers, args.store, values, config,
        options=RunnerOptions(
            snapshot_every=args.snapshot_every, leader_sync_behind=args.leader_fsync == "behind"
        ),
    )
    ValueLogService(runner, values).register(runner.registry)
    await runner.start()
    # Everything loaded so far lives as long as the process: keep it out of the
    # full collections, whose pauses would otherwise land on commit latency.
    gc.freeze()
    log.info("%s serving on %s, peers %s", args.id, peers[args.id], peers)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stopped = asyncio.create_task(runner.wait_stopped())
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait({stopped, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    await runner.stop()
    if runner.failure is not None:
        log.error("%s stopped after a failure: %r", args.id, runner.failure)
        return 1
    log.info("%s stopped", args.id)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    try:
        peers = parse_peers(args.peers)
    except ValueError as exc:
        print(f"mqraft: bad --peers: {exc}", file=sys.stderr)
        return 2
    if args.id not in peers:
        print(f"mqraft: --id {args.id!r} is not one of the peers {sorted(peers)}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(serve(args))
    except (OSError, RaftStoreError) as exc:  # the address is taken, a bad store file...
        log.error("%s cannot run: %s", args.id, exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
