"""Signatures as RocketMQ's clients make them: the official Python client's gRPC
metadata, and AclClientRPCHook's remoting ext fields."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime

import pytest
from rocketmq.v5.util.signature import Signature

from mqcluster.auth.model import User
from mqcluster.auth.signature import (
    AuthenticationError,
    grpc_authorization,
    sign_remoting,
    verify_grpc,
    verify_remoting,
)

USERS = {"alice": User("alice", "alice-secret"),
         "off": User("off", "pw", enabled=False)}
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()
STAMP = "20260102T030405Z"


def md(ak: str, secret: str, stamp: str = STAMP) -> dict[str, str]:
    return {"x-mq-date-time": stamp, "authorization": grpc_authorization(ak, secret, stamp)}


def test_the_official_clients_signature_is_the_one_verified() -> None:
    official = Signature.sign("alice-secret", STAMP)
    header = (f"MQv2-HMAC-SHA1 Credential=alice, SignedHeaders=x-mq-date-time, "
              f"Signature={official}")
    assert header == grpc_authorization("alice", "alice-secret", STAMP)
    assert verify_grpc({"x-mq-date-time": STAMP, "authorization": header},
                       USERS.get, NOW) == USERS["alice"]


@pytest.mark.parametrize(("metadata", "why"), [
    ({}, "no authorization header"),
    (md("alice", "wrong"), "does not match"),
    (md("bob", "alice-secret"), "'bob' does not exist"),
    (md("off", "pw"), "disabled"),
    (md("alice", "alice-secret", "20260102T023405Z"), "more than 900 s"),
    (md("alice", "alice-secret", "yesterday"), "is not yyyyMMddTHHmmssZ"),
    ({"x-mq-date-time": STAMP, "authorization": "Basic YWxpY2U="}, "algorithm"),
    ({"x-mq-date-time": STAMP, "authorization": "MQv2-HMAC-SHA1 Credential=alice"},
     "lacks Credential or Signature"),
])
def test_a_grpc_call_that_proves_nothing_is_refused_saying_why(
        metadata: dict[str, str], why: str) -> None:
    with pytest.raises(AuthenticationError, match=why):
        verify_grpc(metadata, USERS.get, NOW)


def test_a_date_time_within_the_tolerance_passes() -> None:
    assert verify_grpc(md("alice", "alice-secret", "20260102T031904Z"), USERS.get, NOW)


def test_remoting_signature_is_acl_client_rpc_hooks() -> None:
    """Base64 HMAC-SHA1 over the values of the ext fields in key order (AccessKey
    among them), then the body."""
    fields = {"topic": "T", "b": "x", "queueId": "1"}
    sign_remoting(fields, b"body", "alice", "alice-secret")
    content = b"alice" + b"x" + b"1" + b"T" + b"body"  # AccessKey, b, queueId, topic
    expected = base64.b64encode(
        hmac.new(b"alice-secret", content, hashlib.sha1).digest()).decode()
    assert fields["Signature"] == expected
    assert verify_remoting(fields, b"body", USERS.get) == USERS["alice"]


def test_a_changed_field_or_body_breaks_the_remoting_signature() -> None:
    fields = {"topic": "T"}
    sign_remoting(fields, b"body", "alice", "alice-secret")
    with pytest.raises(AuthenticationError, match="does not match"):
        verify_remoting(fields, b"other", USERS.get)
    with pytest.raises(AuthenticationError, match="does not match"):
        verify_remoting({**fields, "topic": "U"}, b"body", USERS.get)
    with pytest.raises(AuthenticationError, match="no AccessKey"):
        verify_remoting({"topic": "T"}, b"", USERS.get)
