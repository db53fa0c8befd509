"""Clear a broker store for a mode migration, keeping named files, once per migration id.

A DLedger commitlog cannot be read in controller mode, so the migration of RocketMQ's
controller-mode deployment guide (its upgrade notes, DLedger to Controller)
clears each replica's store except its topic and subscription-group configs
before the broker starts in the new mode. The pods run this before the broker
on every start while the migration is rendered; a marker file named after the
migration id makes every run after the first a no-op, so data written in the
new mode is never cleared. The marker is written last: a run cut off half-way
is simply repeated.

    python -m mqcluster.store.clear --store /data --id m1700000000 \\
        --keep config/topics.json --keep config/subscriptionGroup.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

MARKER_PREFIX = ".mqcluster-cleared-"


class ClearError(ValueError):
    """A request that would clear the wrong thing (bad id, a kept path leaving the store)."""


def marker(store: Path, migration_id: str) -> Path:
    if not migration_id or "/" in migration_id or migration_id.startswith("."):
        raise ClearError(f"--id {migration_id!r}: must be a plain name")
    return store / f"{MARKER_PREFIX}{migration_id}"


def kept_paths(store: Path, keep: Sequence[str]) -> set[Path]:
    out = set()
    root = store.resolve()
    for rel in keep:
        path = (store / rel).resolve()
        if path == root or root not in path.parents:
            raise ClearError(f"--keep {rel!r}: not a path inside the store")
        out.add(path)
    return out


def clear_store(store: Path, migration_id: str, keep: Sequence[str]) -> list[str]:
    """Remove everything under ``store`` but ``keep`` (and their backups); the removed
    paths, relative to the store. Nothing happens when this id's marker exists."""
    done = marker(store, migration_id)
    if done.exists():
        return []
    kept = kept_paths(store, [*keep, *(f"{k}.bak" for k in keep)])
    removed: list[str] = []
    if store.exists():
        removed = _clear_dir(store.resolve(), kept, store.resolve())
    store.mkdir(parents=True, exist_ok=True)
    with open(done, "w", encoding="utf-8") as f:
        f.write("\n".join(sorted(removed)) + "\n")
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(store)
    return removed


def _clear_dir(directory: Path, kept: set[Path], root: Path) -> list[str]:
    removed: list[str] = []
    for entry in sorted(directory.iterdir()):
        path = entry.resolve() if not entry.is_symlink() else entry
        if path in kept or (entry.name.startswith(MARKER_PREFIX) and directory == root):
            continue
        if entry.is_dir() and not entry.is_symlink():
            if any(k == path or path in k.parents for k in kept):
                removed += _clear_dir(path, kept, root)
                continue
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed.append(str(entry.relative_to(root)))
    _fsync_dir(directory)
    return removed


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mqcluster.store.clear",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, type=Path, help="storePathRootDir")
    parser.add_argument("--id", required=True, help="migration id (clears once per id)")
    parser.add_argument("--keep", action="append", default=[],
                        help="path relative to the store to keep (repeatable)")
    args = parser.parse_args(argv)
    try:
        removed = clear_store(args.store, args.id, args.keep)
    except ClearError as exc:
        print(f"clear: {exc}", file=sys.stderr)
        return 2
    if removed:
        print(f"cleared {args.store} for migration {args.id}: removed {len(removed)} path(s),"
              f" kept {', '.join(args.keep) or 'nothing'}")
    else:
        print(f"{args.store}: already cleared for migration {args.id} (or empty)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
