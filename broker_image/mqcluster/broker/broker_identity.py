"""Broker side of controller registration: the persistent broker id (RocketMQ 5.1.1+).

A broker in controller mode keeps ``<store>/brokerIdentity`` holding
``cluster#brokerName#brokerId#code``. On its first start it asks the
controller for the next id, writes the file (atomically) with a fresh random
code, then applies the id with register check code ``<listen address>;<code>``.
On later starts it re-applies the id from the file: the controller accepts the
same code again (recording a new address if it moved) and refuses an id held
by another code. Then it registers and, when its group has no master, asks to
be elected (the first broker of a new group becomes its master).

    client = ControllerClient(config.controllerAddr)
    reg = await register_with_controller(client, store_dir, cluster, name, addr)
    reg.broker_id, reg.replica_info.master_broker_id, ...
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from pathlib import Path

from mqcluster.client.controller import ControllerClient, ControllerError, ReplicaInfo
from mqcluster.common.files import atomic_write
from mqcluster.protocol.controller import FIRST_BROKER_CONTROLLER_ID
from mqcluster.protocol.controller import ControllerResponseCode as Code

log = logging.getLogger(__name__)

IDENTITY_FILE = "brokerIdentity"


class IdentityError(Exception):
    """The identity file is unreadable, malformed, or belongs to another broker group."""


@dataclass(frozen=True)
class BrokerIdentityRecord:
    cluster_name: str
    broker_name: str
    broker_id: int
    code: str

    def encode(self) -> str:
        for part in (self.cluster_name, self.broker_name, self.code):
            if "#" in part or not part:
                raise IdentityError(f"identity field {part!r} is empty or contains '#'")
        return f"{self.cluster_name}#{self.broker_name}#{self.broker_id}#{self.code}"

    @classmethod
    def parse(cls, text: str) -> BrokerIdentityRecord:
        parts = text.strip().split("#")
        if len(parts) != 4 or not all(parts):
            raise IdentityError(f"identity {text.strip()!r} is not cluster#broker#id#code")
        try:
            broker_id = int(parts[2])
        except ValueError:
            raise IdentityError(f"identity broker id {parts[2]!r} is not an integer") from None
        if broker_id < FIRST_BROKER_CONTROLLER_ID:
            raise IdentityError(f"identity broker id {broker_id} is below 1")
        return cls(parts[0], parts[1], broker_id, parts[3])

    def check_code(self, broker_addr: str) -> str:
        """The register check code sent to the controller: ``address;code``."""
        return f"{broker_addr};{self.code}"


def new_identity_code() -> str:
    return secrets.token_hex(16)


def identity_path(store_dir: str | Path) -> Path:
    return Path(store_dir) / IDENTITY_FILE


def read_identity(path: str | Path) -> BrokerIdentityRecord | None:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise IdentityError(f"cannot read {p}: {exc.strerror or exc}") from exc
    return BrokerIdentityRecord.parse(text)


def write_identity(path: str | Path, record: BrokerIdentityRecord) -> None:
    """Write-to-temp, fsync, rename, fsync the directory: the file is old or new, never torn."""
    atomic_write(path, (record.encode() + "\n").encode("utf-8"))


@dataclass
class Registration:
    broker_id: int
    identity: BrokerIdentityRecord
    replica_info: ReplicaInfo


async def obtain_broker_id(
    client: ControllerClient,
    store_dir: str | Path,
    cluster: str,
    broker_name: str,
    broker_addr: str,
    *,
    max_attempts: int = 10,
) -> BrokerIdentityRecord:
    """The broker's id: from its identity file if the controller agrees, else a new one."""
    path = identity_path(store_dir)
    record = read_identity(path)
    if record is not None and (record.cluster_name, record.broker_name) != (cluster, broker_name):
        raise IdentityError(
            f"{path} belongs to {record.cluster_name}/{record.broker_name}, "
            f"not {cluster}/{broker_name}"
        )
    for _ in range(max_attempts):
        if record is None:
            next_id = await client.get_next_broker_id(cluster, broker_name)
            record = BrokerIdentityRecord(cluster, broker_name, next_id, new_identity_code())
            write_identity(path, record)
        try:
            await client.apply_broker_id(
                cluster, broker_name, record.broker_id, record.check_code(broker_addr)
            )
        except ControllerError as exc:
            if exc.code != Code.CONTROLLER_BROKER_ID_INVALID:
                raise
            log.warning(
                "broker id %s of %s is held by another broker (%s); asking for a new one",
                record.broker_id, broker_name, exc.remark,
            )
            record = None
            continue
        return record
    raise IdentityError(f"no broker id obtained for {broker_name} after {max_attempts} attempts")


async def register_with_controller(
    client: ControllerClient,
    store_dir: str | Path,
    cluster: str,
    broker_name: str,
    broker_addr: str,
    *,
    elect_if_no_master: bool = True,
) -> Registration:
    """Obtain the broker id, register, and ask to be elected when the group has no master."""
    record = await obtain_broker_id(client, store_dir, cluster, broker_name, broker_addr)
    info = await client.register_broker(cluster, broker_name, record.broker_id, broker_addr)
    if elect_if_no_master and info.master_broker_id is None:
        try:
            await client.elect_master(cluster, broker_name, record.broker_id)
        except ControllerError as exc:
            log.info("self-election of %s/%s: %s", broker_name, record.broker_id, exc)
        info = await client.get_replica_info(broker_name)
    return Registration(record.broker_id, record, info)
