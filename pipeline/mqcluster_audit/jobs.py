"""The checks: each job reads through the data sources, computes Spark tables and a
summary with a verdict. Small results are collected; large ones stay DataFrames and are
written as Parquet by ``report``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from mqcluster_audit import rules, stores


@dataclass
class JobResult:
    job: str
    ok: bool
    summary: dict[str, Any]
    tables: dict[str, DataFrame] = field(default_factory=dict)
    plots: dict[str, Any] = field(default_factory=dict)


def _stores_option(replicas: list[tuple[str, Path]]) -> str:
    return ",".join(f"{name}={path}" for name, path in replicas)


def commitlog(spark: SparkSession, replicas: list[tuple[str, Path]],
              verify_crc: bool = True) -> DataFrame:
    return (spark.read.format("mqcluster.commitlog")
            .option("stores", _stores_option(replicas))
            .option("verifyCrc", str(verify_crc).lower()).load())


def _rows(spark: SparkSession, fmt: str, replicas: list[tuple[str, Path]]) -> DataFrame:
    return spark.read.format(fmt).option("stores", _stores_option(replicas)).load()


# ---------------------------------------------------------------- consistency


def consistency(spark: SparkSession, replicas: list[tuple[str, Path]],
                master: str | None = None, group: str = "group") -> JobResult:
    """Across the replicas of one group: where they first differ, whether their epochs
    agree, and what the master has below the confirm offset that a replica lacks."""
    cl = commitlog(spark, replicas).cache()
    ok_rows = cl.where(F.col("status") == "ok")
    ends = {r["replica"]: int(r["end"] or 0) for r in ok_rows.groupBy("replica").agg(
        F.max(F.col("physical_offset") + F.col("size")).alias("end")).collect()}
    for name, _ in replicas:
        ends.setdefault(name, 0)
    epochs = _rows(spark, "mqcluster.epochs", replicas).cache()
    last_epoch = {r["replica"]: int(r["e"]) for r in
                  epochs.groupBy("replica").agg(F.max("epoch").alias("e")).collect()}
    if master is None:
        master = max(ends, key=lambda r: (last_epoch.get(r, 0), ends[r]))
    master_path = dict(replicas)[master]
    confirm = stores.confirm_offset(master_path)
    if confirm is None:
        confirm = min(ends.values())
    damaged = cl.where(F.col("status") != "ok").select(
        "replica", "segment", "physical_offset", "size", "status", "reason")
    # Offsets every replica reached that do not hold the same record everywhere.
    common_end = min(ends.values())
    variants = (ok_rows.where(F.col("physical_offset") < common_end)
                .groupBy("physical_offset")
                .agg(F.countDistinct("size", "crc").alias("variants"),
                     F.countDistinct("replica").alias("holders"),
                     F.min(F.col("crc_ok").cast("int")).alias("all_crc_ok")))
    divergent = variants.where((F.col("variants") > 1) | (F.col("holders") < len(replicas))
                               | (F.col("all_crc_ok") == 0))
    first_row = divergent.agg(F.min("physical_offset").alias("o")).collect()[0]
    first_divergent = None if first_row["o"] is None else int(first_row["o"])
    # Epoch entries that not every replica has (the same epoch from the same start).
    epoch_table = (epochs.groupBy("epoch", "start_offset")
                   .agg(F.collect_set("replica").alias("replicas"))
                   .withColumn("agreed", F.size("replicas") == len(replicas))
                   .orderBy("epoch"))
    disagreeing = [r.asDict() for r in epoch_table.where(
        ~F.col("agreed") & (F.col("start_offset") < confirm)).collect()]
    master_rows = ok_rows.where((F.col("replica") == master)
                                & (F.col("physical_offset") + F.col("size") <= confirm))
    missing = None
    for name, _ in replicas:
        if name == master:
            continue
        # Absent from the replica; a damaged or different record there is reported as
        # damaged or divergent instead.
        theirs = cl.where(F.col("replica") == name).select("physical_offset")
        gap = (master_rows.join(theirs, ["physical_offset"], "left_anti")
               .select(F.lit(name).alias("replica"), "physical_offset", "size", "topic",
                       "queue_id", "queue_offset", "msg_id", "keys"))
        missing = gap if missing is None else missing.unionByName(gap)
    assert missing is not None or len(replicas) == 1
    missing_count = 0 if missing is None else missing.count()
    damaged_below = damaged.where(F.col("physical_offset") < confirm).count()
    ok = ((first_divergent is None or first_divergent >= confirm) and not disagreeing
          and missing_count == 0 and damaged_below == 0)
    summary = {
        "group": group, "verdict": "consistent" if ok else "INCONSISTENT", "master": master,
        "confirm_offset": confirm, "end_offsets": ends,
        "first_divergent_offset": first_divergent,
        "epochs_disagreeing_below_confirm": disagreeing,
        "missing_below_confirm": missing_count, "damaged_records": damaged.count(),
        "damaged_below_confirm": damaged_below,
    }
    tables = {"epochs": epoch_table, "damaged": damaged, "divergent": divergent}
    if missing is not None:
        tables["missing"] = missing
    plots = {"epochs": [r.asDict() for r in epochs.orderBy("replica", "epoch").collect()],
             "ends": ends, "confirm": confirm}
    return JobResult("consistency", ok, summary, tables, plots)


# ---------------------------------------------------------------- lag


def lag(spark: SparkSession, replicas: list[tuple[str, Path]]) -> JobResult:
    """Per subscription group, topic and queue: max offset, consumer offset, lag in
    messages and bytes, and whether the group has drained it."""
    cq = _rows(spark, "mqcluster.consumequeue", replicas)
    offsets = _rows(spark, "mqcluster.offsets", replicas)
    queues = cq.groupBy("replica", "topic", "queue_id").agg(
        (F.max("queue_offset") + 1).alias("max_offset"))
    joined = offsets.join(queues, ["replica", "topic", "queue_id"], "left").fillna(
        0, ["max_offset"])
    behind = (cq.alias("c").join(offsets.alias("o"), ["replica", "topic", "queue_id"])
              .where(F.col("c.queue_offset") >= F.col("o.consumer_offset"))
              .groupBy("replica", "group", "topic", "queue_id")
              .agg(F.sum("c.size").alias("lag_bytes")))
    table = (joined.join(behind, ["replica", "group", "topic", "queue_id"], "left")
             .fillna(0, ["lag_bytes"])
             .withColumn("lag_messages",
                         F.greatest(F.lit(0), F.col("max_offset") - F.col("consumer_offset")))
             .withColumn("drained", F.col("lag_messages") == 0)
             .select("replica", "group", "topic", "queue_id", "max_offset",
                     "consumer_offset", "lag_messages", "lag_bytes", "drained")
             .orderBy("group", "topic", "queue_id")).cache()
    per_group = table.groupBy("group").agg(
        F.sum("lag_messages").alias("lag_messages"), F.sum("lag_bytes").alias("lag_bytes"),
        F.min(F.col("drained").cast("int")).alias("drained")).collect()
    groups = {r["group"]: {"lag_messages": int(r["lag_messages"]),
                           "lag_bytes": int(r["lag_bytes"]), "drained": bool(r["drained"])}
              for r in per_group}
    summary = {"groups": groups, "all_drained": all(g["drained"] for g in groups.values())}
    plots = {"lag": [r.asDict() for r in table.collect()]}
    return JobResult("lag", True, summary, {"lag": table}, plots)


# ---------------------------------------------------------------- history


def _classify(item: tuple[str, Iterable[Row]]) -> Iterator[tuple[str, str, int]]:
    """One key's copies, each row carrying the key's ``send``/``ack`` history."""
    key, rows = item
    rows = list(rows)
    copies = [rules.StoredCopy(key, r["msg_id"], r["topic"], r["queue_id"],
                               str(r["queue_offset"])) for r in rows]
    history = sorted(rows[0]["history"] or [], key=lambda h: (h["time_ms"], h["line"]))
    attempts = rules.send_attempts((h["event"], key) for h in history)
    duplicated, retried = rules.classify_copies(copies, attempts)
    for k in duplicated:
        yield k, "duplicated", len(copies)
    for k in retried:
        yield k, "retried", len(copies)


def _reordered(item: tuple[tuple[str, str], Iterable[Row]]
               ) -> Iterator[tuple[str, str, str, int, int]]:
    rows = sorted(item[1], key=lambda r: (r["time_ms"], r["line"]))
    times = {(r["group"], r["key"]): r["time_ms"] for r in reversed(rows)}
    for r in rules.receive_reordered(
            rules.Receipt(r["group"], r["message_group"], r["key"], r["seq"]) for r in rows):
        yield r.group, r.message_group, r.key, r.seq, times[(r.group, r.key)]


COPIES_SCHEMA = "key string, kind string, copies int"
REORDERED_SCHEMA = "group string, message_group string, key string, seq long, time_ms long"


def history(spark: SparkSession, paths: list[Path], replicas: list[tuple[str, Path]],
            gap_ms: int = 1000) -> JobResult:
    """Producer acks against the final stores and consumer receipts, judged by
    ``mqcluster_audit.rules`` (the chaos suite applies the same functions): acknowledged
    but lost, stored twice by the store (``duplicated``) or by a client's retry
    (``retried``: no more copies than the producer's history shows attempts), reordered
    within a FIFO message group; and the windows in which no send was acknowledged for
    longer than ``gap_ms`` (failovers). Copies are told apart
    by queue position: the commitlog rows carry no DLedger index."""
    events = (spark.read.format("mqcluster.history")
              .option("paths", ",".join(str(p) for p in paths)).load().cache())
    bad_lines = events.where(F.col("error").isNotNull()).count()
    events = events.where(F.col("error").isNull())
    primary = replicas[:1]
    stored = (commitlog(spark, primary, verify_crc=False).where(F.col("status") == "ok")
              .select(F.explode(F.split(F.coalesce("keys", F.lit("")), " ")).alias("key"),
                      "msg_id", "topic", "queue_id", "queue_offset")
              .where(F.col("key") != "")).cache()
    acked = events.where(F.col("event") == "ack").select("key").distinct()
    lost = acked.join(stored.select("key").distinct(), "key", "left_anti")
    twice = stored.groupBy("key").count().where(F.col("count") > 1).select("key")
    tries = (events.where(F.col("event").isin("send", "ack")).join(twice, "key")
             .groupBy("key")
             .agg(F.collect_list(F.struct("time_ms", "line", "event")).alias("history")))
    copies = spark.createDataFrame(
        stored.join(twice, "key").join(tries, "key", "left").rdd
        .map(lambda r: (r["key"], r)).groupByKey().flatMap(_classify), COPIES_SCHEMA).cache()
    duplicated = copies.where(F.col("kind") == "duplicated").select("key", "copies")
    retried = copies.where(F.col("kind") == "retried").select("key", "copies")
    receipts = events.where((F.col("event") == "receive") & F.col("message_group").isNotNull())
    reordered = spark.createDataFrame(
        receipts.select("group", "message_group", "key", "seq", "time_ms", "line").rdd
        .map(lambda r: ((r["group"], r["message_group"]), r)).groupByKey()
        .flatMap(_reordered), REORDERED_SCHEMA)
    ack_times = (events.where(F.col("event") == "ack").select("time_ms")
                 .withColumn("previous", F.lag("time_ms").over(Window.orderBy("time_ms"))))
    windows = (ack_times.where(F.col("time_ms") - F.col("previous") > gap_ms)
               .select(F.col("previous").alias("last_ack_ms"),
                       F.col("time_ms").alias("next_ack_ms"),
                       (F.col("time_ms") - F.col("previous")).alias("unavailable_ms"))
               .orderBy("last_ack_ms"))
    counts = {"acknowledged": acked.count(), "lost": lost.count(),
              "duplicated": duplicated.count(), "retried": retried.count(),
              "reordered": reordered.count()}
    ok = counts["lost"] == 0 and counts["duplicated"] == 0 and counts["reordered"] == 0
    window_rows = [r.asDict() for r in windows.collect()]
    summary = {**counts, "verdict": "ok" if ok else "FAILED", "unreadable_lines": bad_lines,
               "failover_windows": len(window_rows),
               "max_unavailable_ms": max((w["unavailable_ms"] for w in window_rows),
                                         default=0)}
    tables = {"lost": lost, "duplicated": duplicated, "retried": retried,
              "reordered": reordered, "windows": windows}
    return JobResult("history", ok, summary, tables, {"windows": window_rows})
