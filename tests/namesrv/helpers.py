"""Start ``mqnamesrv`` processes and run ``mqadmin`` for multi-process tests."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from subprocess import Popen

from mqcluster_testing.procs import Procs, free_addr

BOOT_LINE = "The Name Server boot success"


async def wait_for_output(procs: Procs, p: Popen[bytes], text: str, timeout: float = 30.0) -> str:
    """Wait until the process prints ``text``; fail with its output if it exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = procs.output(p)
        if text in out:
            return out
        if p.poll() is not None:
            raise AssertionError(f"process exited with {p.returncode}:\n{out}")
        await asyncio.sleep(0.05)
    raise AssertionError(f"{text!r} not printed within {timeout}s:\n{procs.output(p)}")


async def start_namesrv(
    procs: Procs, *, conf: Path | None = None, extra: Sequence[str] = ()
) -> tuple[Popen[bytes], str]:
    addr = free_addr()
    host, port = addr.rsplit(":", 1)
    args = ["-m", "mqcluster.namesrv.main", "-p", port, "--bindAddress", host, *extra]
    if conf is not None:
        args += ["-c", str(conf)]
    p = procs.python(*args, name=f"namesrv-{host}")
    await wait_for_output(procs, p, BOOT_LINE)
    return p, addr


async def mqadmin(*args: str, timeout: float = 60.0) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mqcluster.admin.main",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
