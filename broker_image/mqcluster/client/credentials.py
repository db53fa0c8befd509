"""Signing remoting requests with an access key and secret key, as RocketMQ's
``AclClientRPCHook`` does (ACL 2.0 on a broker with ``authenticationEnabled``)."""

from __future__ import annotations

from collections.abc import Callable

from mqcluster.auth.credentials import Credentials
from mqcluster.auth.signature import sign_remoting
from mqcluster.wire.frame import RemotingCommand

Signer = Callable[[RemotingCommand], None]


def remoting_signer(credentials: Credentials) -> Signer:
    def sign(cmd: RemotingCommand) -> None:
        sign_remoting(cmd.ext_fields, cmd.body, credentials.access_key, credentials.secret_key)

    return sign


def signer_of(credentials: Credentials | None) -> Signer | None:
    return None if credentials is None else remoting_signer(credentials)
