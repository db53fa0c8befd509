"""PySpark data sources (Python Data Source API) over broker stores and histories.

    spark.read.format("mqcluster.commitlog").option("stores", "a=/s/a,b=/s/b").load()

``mqcluster.commitlog`` reads one partition per segment file (files are read in
parallel) and yields Arrow record batches; ``mqcluster.epochs``,
``mqcluster.consumequeue``, ``mqcluster.offsets``, ``mqcluster.dledger`` (the DLedger-mode
Raft log: term, index, messages per entry) take the same ``stores`` option;
``mqcluster.history`` takes ``paths`` (JSON-lines files). ``body=true`` adds message
bodies; ``verifyCrc=false`` skips the CRC check.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqcluster_audit import history, segments, stores


def _flag(options: Any, name: str, default: bool) -> bool:
    return str(options.get(name, str(default))).lower() == "true"


@dataclass
class FilePartition(InputPartition):
    replica: str
    path: str


def _arrow_schema_ddl(schema: pa.Schema) -> str:
    names = {pa.string(): "string", pa.int32(): "int", pa.int64(): "bigint",
             pa.bool_(): "boolean", pa.binary(): "binary"}
    return ", ".join(f"{f.name} {names[f.type]}" for f in schema)


class CommitLogSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mqcluster.commitlog"

    def schema(self) -> str:
        return _arrow_schema_ddl(segments.SCHEMA)

    def reader(self, schema: Any) -> DataSourceReader:
        return CommitLogReader(dict(self.options))


class CommitLogReader(DataSourceReader):
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        parts: list[InputPartition] = []
        for replica, store in stores.parse_stores(self.options.get("stores", "")):
            directory = stores.commitlog_dir(store)
            if directory.is_dir():
                parts += [FilePartition(replica, str(p))
                          for p in segments.segment_files(directory)]
        return parts or [FilePartition("", "")]  # Spark wants at least one

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilePartition)
        if not partition.path:
            return
        yield segments.read_segment(Path(partition.path), partition.replica,
                                    _flag(self.options, "body", False),
                                    _flag(self.options, "verifyCrc", True))


class _RowsSource(DataSource):
    ddl = ""

    def schema(self) -> str:
        return self.ddl

    def reader(self, schema: Any) -> DataSourceReader:
        return _RowsReader(dict(self.options), type(self))

    @staticmethod
    def rows(replica: str, store: Path) -> list[dict[str, Any]]:
        raise NotImplementedError


class _RowsReader(DataSourceReader):
    def __init__(self, options: dict[str, Any], source: type[_RowsSource]) -> None:
        self.options = options
        self.source = source

    def partitions(self) -> list[InputPartition]:
        return [FilePartition(r, str(p)) for r, p in
                stores.parse_stores(self.options.get("stores", ""))]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, FilePartition)
        names = [c.split()[0] for c in self.source.ddl.split(", ")]
        for row in self.source.rows(partition.replica, Path(partition.path)):
            yield tuple(row.get(n) for n in names)


class EpochsSource(_RowsSource):
    ddl = "replica string, epoch int, start_offset bigint, end_offset bigint"

    @classmethod
    def name(cls) -> str:
        return "mqcluster.epochs"

    @staticmethod
    def rows(replica: str, store: Path) -> list[dict[str, Any]]:
        return stores.epoch_rows(replica, store)


class ConsumeQueueSource(_RowsSource):
    ddl = ("replica string, topic string, queue_id int, queue_offset bigint, "
           "physical_offset bigint, size int")

    @classmethod
    def name(cls) -> str:
        return "mqcluster.consumequeue"

    @staticmethod
    def rows(replica: str, store: Path) -> list[dict[str, Any]]:
        return list(stores.consume_queue_rows(replica, store))


class OffsetsSource(_RowsSource):
    ddl = "replica string, topic string, group string, queue_id int, consumer_offset bigint"

    @classmethod
    def name(cls) -> str:
        return "mqcluster.offsets"

    @staticmethod
    def rows(replica: str, store: Path) -> list[dict[str, Any]]:
        return stores.offset_rows(replica, store)


class DLedgerSource(_RowsSource):
    ddl = ("replica string, segment string, index bigint, term bigint, type int, "
           "data_length int, messages int, status string, reason string")

    @classmethod
    def name(cls) -> str:
        return "mqcluster.dledger"

    @staticmethod
    def rows(replica: str, store: Path) -> list[dict[str, Any]]:
        return list(stores.dledger_rows(replica, store))


class HistorySource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mqcluster.history"

    def schema(self) -> str:
        return _arrow_schema_ddl(history.SCHEMA)

    def reader(self, schema: Any) -> DataSourceReader:
        return HistoryReader(dict(self.options))


class HistoryReader(DataSourceReader):
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        paths = [p for p in str(self.options.get("paths", "")).split(",") if p]
        return [FilePartition("", p) for p in paths or [""]]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilePartition)
        if partition.path:
            yield history.read_history(Path(partition.path))


SOURCES = (CommitLogSource, EpochsSource, ConsumeQueueSource, OffsetsSource, DLedgerSource,
           HistorySource)


def register(spark: SparkSession) -> None:
    for source in SOURCES:
        spark.dataSource.register(source)


def session(master: str = "local[*]", app: str = "mqaudit") -> SparkSession:
    # Spark's Python workers must import this package: run them on this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(master).appName(app)
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "8")
             .getOrCreate())
    register(spark)
    return spark
