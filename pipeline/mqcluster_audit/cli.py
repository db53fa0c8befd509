"""``mqaudit <job> --stores ... --out report/``: run one audit job on Spark.

Exit status 0 when the check passes, 1 when it finds a fault, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from mqcluster_audit import jobs, report, stores
from mqcluster_audit.sources import session


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="mqaudit", description="Audit broker stores on Spark.")
    p.add_argument("job", choices=["consistency", "lag", "history"])
    p.add_argument("--stores", required=True,
                   help="store directories, 'replica=/path,...' (the first is the primary)")
    p.add_argument("--out", required=True, type=Path, help="directory for the report")
    p.add_argument("--master", default="local[*]",
                   help="Spark master: local[*] (default), spark://host:7077, k8s://...")
    p.add_argument("--group", default="group", help="name of the broker group (reports)")
    p.add_argument("--primary", help="consistency: the master replica (default: newest epoch)")
    p.add_argument("--history", default="", help="history: JSON-lines files, ','-separated")
    p.add_argument("--gap-ms", type=int, default=1000,
                   help="history: a longer gap between acks counts as a failover window")
    return p.parse_args(argv)


def progress(message: str) -> None:
    print(f"[mqaudit {time.strftime('%H:%M:%S')}] {message}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        replicas = stores.parse_stores(args.stores)
    except ValueError as exc:
        print(f"mqaudit: --stores: {exc}", file=sys.stderr)
        return 2
    for name, path in replicas:
        if not path.is_dir():
            print(f"mqaudit: --stores: {name}: {path} is not a directory", file=sys.stderr)
            return 2
    histories = [Path(p) for p in args.history.split(",") if p]
    if args.job == "history" and not histories:
        print("mqaudit: history needs --history <file,...>", file=sys.stderr)
        return 2
    progress(f"starting Spark ({args.master})")
    spark = session(args.master)
    spark.sparkContext.setLogLevel("ERROR")
    progress(f"running {args.job} over {len(replicas)} store(s)")
    if args.job == "consistency":
        result = jobs.consistency(spark, replicas, args.primary, args.group)
    elif args.job == "lag":
        result = jobs.lag(spark, replicas)
    else:
        result = jobs.history(spark, histories, replicas, args.gap_ms)
    path = report.write(result, args.out)
    progress(f"{'passed' if result.ok else 'FAILED'}; report: {path}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
