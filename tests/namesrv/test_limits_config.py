"""A real ``mqnamesrv`` takes its remoting limits from its config file."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

from mqcluster.client.namesrv import NamesrvClient
from mqcluster_testing.procs import Procs, procs  # noqa: F401
from tests.namesrv.helpers import start_namesrv


async def closed(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), 10) == b""
    except ConnectionResetError:
        return True


async def test_limits_from_the_config_file_apply_to_the_listener(
        procs: Procs, tmp_path: Path) -> None:  # noqa: F811
    conf = tmp_path / "namesrv.conf"
    conf.write_text("serverMaxConnections=2\nserverFrameMaxLength=4096\n")
    p, addr = await start_namesrv(procs, conf=conf)
    host, port = addr.rsplit(":", 1)
    first, second = NamesrvClient([addr]), NamesrvClient([addr])
    try:
        await first.get_cluster_info()  # connection 1, accepted and served
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(struct.pack(">II", 5000, 10))  # connection 2: a frame over 4096
        assert await closed(reader)
        writer.close()
        await second.get_cluster_info()  # connection 2 again, served
        reader, third = await asyncio.open_connection(host, int(port))
        assert await closed(reader)  # connection 3: refused
        third.close()
        await first.get_cluster_info()
    finally:
        await first.close()
        await second.close()
    out = procs.output(p)
    assert "frame of 5000 bytes exceeds limit 4096" in out
    assert "refusing connection" in out and "(limit 2)" in out


async def test_a_bad_limit_stops_the_name_server_naming_the_key(
        procs: Procs, tmp_path: Path) -> None:  # noqa: F811
    conf = tmp_path / "namesrv.conf"
    conf.write_text("serverChannelMaxIdleTimeSeconds=-1\n")
    p = procs.python("-m", "mqcluster.namesrv.main", "-c", str(conf), name="bad")
    assert await asyncio.to_thread(p.wait, 60) == 1
    assert "serverChannelMaxIdleTimeSeconds" in procs.output(p)
