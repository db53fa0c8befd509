"""Loaded by Python children of the peers bench when it partitions (``bench/partition.py``
puts this directory on their PYTHONPATH): a child whose command line holds a substring
listed in ``$MQBENCH_CGROUP_MAP`` joins that line's cgroup before it opens any socket,
so the bench can later drop exactly its packets."""

import os


def _join() -> None:
    listing = os.environ.get("MQBENCH_CGROUP_MAP")
    if not listing:
        return
    try:
        with open("/proc/self/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        with open(listing) as f:
            lines = f.read().splitlines()
    except OSError:
        return
    for line in lines:
        part, _, group = line.partition("\t")
        if part and part in cmdline:
            fd = os.open(os.path.join(group, "cgroup.procs"), os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
            return


_join()
