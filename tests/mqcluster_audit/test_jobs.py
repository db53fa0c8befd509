"""Each job on synthetic stores with planted faults finds exactly those faults."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from mqcluster.store.epoch_file import EpochFileCache
from mqcluster.store.message import MessageRecord
from mqcluster_audit import jobs
from mqcluster_audit.cli import main
from mqcluster_audit.history import HistoryWriter
from mqcluster_audit.segments import segment_files
from mqcluster_testing.ha.dledger_group import DLedgerGroup
from tests.mqcluster_audit.conftest import messages, write_store


def replicate(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    (dst / "lock").unlink(missing_ok=True)
    return dst


def cut_commitlog(store: Path, at: int) -> None:
    """Drop everything from commitlog offset ``at`` on (a replica that is behind)."""
    for f in segment_files(store / "commitlog"):
        start = int(f.name)
        if start >= at:
            f.unlink()
        elif start + f.stat().st_size > at:
            data = f.read_bytes()
            f.write_bytes(data[:at - start] + bytes(len(data) - (at - start)))


def test_consistent_replicas(spark: SparkSession, tmp_path: Path) -> None:
    write_store(tmp_path / "m", messages(100), confirm_after=80)
    replicate(tmp_path / "m", tmp_path / "a")
    result = jobs.consistency(spark, [("m", tmp_path / "m"), ("a", tmp_path / "a")])
    assert result.ok
    s = result.summary
    assert s["first_divergent_offset"] is None and s["missing_below_confirm"] == 0
    assert s["damaged_records"] == 0 and s["epochs_disagreeing_below_confirm"] == []


def test_planted_divergence_gap_torn_tail_and_epoch(spark: SparkSession, tmp_path: Path) -> None:
    results = write_store(tmp_path / "m", messages(100), confirm_after=80)
    confirm = results[79].commitlog_offset + results[79].store_size
    flipped = replicate(tmp_path / "m", tmp_path / "flipped")
    at = results[10].commitlog_offset
    seg = segment_files(flipped / "commitlog")[0]
    data = bytearray(seg.read_bytes())
    data[at - int(seg.name) + 120] ^= 0x01
    seg.write_bytes(bytes(data))
    behind = replicate(tmp_path / "m", tmp_path / "behind")
    cut_commitlog(behind, results[50].commitlog_offset)
    torn = replicate(tmp_path / "m", tmp_path / "torn")
    tail = results[95].commitlog_offset + 20
    cut_commitlog(torn, tail)
    forked = replicate(tmp_path / "m", tmp_path / "forked")
    cache = EpochFileCache(str(forked / "epochFileCheckpoint"))
    cache.append(1, 0)
    cache.append(7, results[30].commitlog_offset)

    result = jobs.consistency(spark, [("m", tmp_path / "m"), ("flipped", flipped),
                                      ("behind", behind), ("torn", torn), ("forked", forked)],
                              master="m")
    s = result.summary
    assert not result.ok
    assert s["confirm_offset"] == confirm
    assert s["first_divergent_offset"] == at
    assert s["missing_below_confirm"] == 30  # messages 50..79 are not on "behind"
    missing = {(r["replica"], r["queue_offset"]) for r in result.tables["missing"].collect()}
    assert missing == {("behind", i) for i in range(50, 80)}
    damaged = [(r["replica"], r["physical_offset"], r["status"])
               for r in result.tables["damaged"].collect()]
    assert sorted(damaged) == sorted([("flipped", at, "corrupt"),
                                      ("torn", results[95].commitlog_offset, "truncated")])
    assert [(e["epoch"], e["start_offset"]) for e in s["epochs_disagreeing_below_confirm"]] \
        == [(7, results[30].commitlog_offset)]


def test_lag_per_group_and_queue(spark: SparkSession, tmp_path: Path) -> None:
    results = write_store(tmp_path / "s", messages(20, queues=2),
                          offsets={("G", "AuditTopic", 0): 10, ("G", "AuditTopic", 1): 4,
                                   ("H", "AuditTopic", 0): 10})
    result = jobs.lag(spark, [("s", tmp_path / "s")])
    rows = {(r["group"], r["queue_id"]): r for r in result.tables["lag"].collect()}
    assert rows[("G", 0)]["lag_messages"] == 0 and rows[("G", 0)]["drained"]
    assert rows[("G", 1)]["lag_messages"] == 6
    q1_sizes = [r.store_size for i, r in enumerate(results) if i % 2 == 1][4:]
    assert rows[("G", 1)]["lag_bytes"] == sum(q1_sizes)
    assert result.summary["groups"]["G"]["drained"] is False
    assert result.summary["groups"]["H"] == {"lag_messages": 0, "lag_bytes": 0, "drained": True}


@pytest.mark.timeout(900)  # several Spark stages: minutes on a loaded 2-core machine
def test_history_finds_exactly_the_planted_faults(spark: SparkSession, tmp_path: Path) -> None:
    records = messages(10)
    records[7].properties["UNIQ_KEY"] = "u7"
    records += [MessageRecord("AuditTopic", 0, b"again", keys=["k5"]),  # the store's fault
                MessageRecord("AuditTopic", 0, records[7].body, keys=["k7"],
                              properties={"UNIQ_KEY": "u7"})]  # a client's retry
    write_store(tmp_path / "s", records)
    path = tmp_path / "history.jsonl"
    with path.open("w") as f:
        w = HistoryWriter(f, "p1")
        t = 1_000_000
        for _ in range(2):  # the client's two attempts at k7, both stored
            f.write(json.dumps({"event": "send", "client": "p1", "time_ms": t, "key": "k7",
                                "topic": "AuditTopic", "msg_id": "u7"}) + "\n")
        for i in range(11):
            gap = 3000 if i == 6 else 10
            t += gap
            f.write(json.dumps({"event": "ack", "client": "p1", "time_ms": t, "key": f"k{i}",
                                "topic": "AuditTopic", "msg_id": f"id{i}"}) + "\n")
        for seq, key in ((1, "k1"), (2, "k2"), (4, "k4"), (3, "k3")):
            t += 5
            f.write(json.dumps({"event": "receive", "client": "c1", "time_ms": t,
                                "key": key, "group": "G", "message_group": "order-1",
                                "seq": seq}) + "\n")
        w.write("send", "k99")
        f.write("not json\n")
    result = jobs.history(spark, [path], [("s", tmp_path / "s")], gap_ms=1000)
    s = result.summary
    assert not result.ok
    assert (s["acknowledged"], s["lost"], s["duplicated"], s["reordered"]) == (11, 1, 1, 1)
    assert [r["key"] for r in result.tables["lost"].collect()] == ["k10"]
    assert [r["key"] for r in result.tables["duplicated"].collect()] == ["k5"]
    assert [r["key"] for r in result.tables["retried"].collect()] == ["k7"]
    assert s["retried"] == 1
    assert [r["seq"] for r in result.tables["reordered"].collect()] == [3]
    assert s["failover_windows"] == 1 and s["max_unavailable_ms"] == 3000
    assert s["unreadable_lines"] == 1


def test_cli_writes_parquet_summary_and_html_and_fails_on_a_fault(tmp_path: Path,
                                                                  spark: SparkSession) -> None:
    write_store(tmp_path / "m", messages(30), confirm_after=30)
    behind = replicate(tmp_path / "m", tmp_path / "b")
    cut_commitlog(behind, 0)
    out = tmp_path / "report"
    rc = main(["consistency", "--stores", f"m={tmp_path / 'm'},b={behind}", "--out", str(out),
               "--master", "local[2]", "--primary", "m"])
    assert rc == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] is False and summary["missing_below_confirm"] == 30
    page = (out / "report.html").read_text()
    assert "<svg" in page and "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"',
                                                         "")
    assert (out / "missing.parquet").is_dir()
    assert spark.read.parquet(str(out / "missing.parquet")).count() == 30
    assert main(["lag", "--stores", "/nonexistent", "--out", str(out)]) == 2


def test_dledger_log_as_rows(spark: SparkSession, tmp_path: Path) -> None:
    async def run() -> None:
        g = DLedgerGroup(tmp_path / "group")
        try:
            await g.start()
            leader = await g.wait_leader()
            for i in range(5):
                assert (await g.put(leader, f"d{i}".encode())).ok
        finally:
            await g.stop()

    asyncio.run(run())
    store = tmp_path / "group" / "n0"
    df = spark.read.format("mqcluster.dledger").option("stores", f"n0={store}").load()
    rows = df.where("messages > 0").orderBy("index").collect()
    assert [r["messages"] for r in rows] == [1] * 5
    assert all(r["status"] == "ok" and r["term"] >= 1 for r in rows)
    assert [r["index"] for r in rows] == sorted(r["index"] for r in rows)
