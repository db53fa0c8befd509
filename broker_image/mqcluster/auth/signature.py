"""Request signatures as RocketMQ's clients make them.

gRPC (the official 5.x clients): metadata ``x-mq-date-time: yyyyMMddTHHmmssZ`` and
``authorization: MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time,
Signature=<hex HMAC-SHA1(secret, date-time)>``.
Remoting (``AclClientRPCHook``): ext fields ``AccessKey`` and ``Signature``, the Base64
HMAC-SHA1 over the values of every other ext field in key order, then the body.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from mqcluster.auth.model import User

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
DATE_TIME_HEADER = "x-mq-date-time"
AUTHORIZATION_HEADER = "authorization"
ALGORITHM = "MQv2-HMAC-SHA1"
DATE_FORMAT = "%Y%m%dT%H%M%SZ"
DEFAULT_TOLERANCE_S = 15 * 60.0


class AuthenticationError(Exception):
    """The request does not prove who sent it; the message says why (never the secret)."""


Users = Callable[[str], User | None]


def grpc_signature(secret: str, date_time: str) -> str:
    return hmac.new(secret.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def grpc_authorization(access_key: str, secret: str, date_time: str) -> str:
    return (f"{ALGORITHM} Credential={access_key}, SignedHeaders={DATE_TIME_HEADER}, "
            f"Signature={grpc_signature(secret, date_time)}")


def _known(users: Users, access_key: str) -> User:
    user = users(access_key)
    if user is None:
        raise AuthenticationError(f"user {access_key!r} does not exist")
    if not user.enabled:
        raise AuthenticationError(f"user {access_key!r} is disabled")
    return user


def verify_grpc(metadata: Mapping[str, str], users: Users, now: float,
                tolerance_s: float = DEFAULT_TOLERANCE_S) -> User:
    """The user a gRPC call's metadata proves, or AuthenticationError."""
    header = metadata.get(AUTHORIZATION_HEADER)
    if not header:
        raise AuthenticationError("no authorization header: the call carries no credentials")
    algorithm, _, rest = header.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise AuthenticationError(f"authorization algorithm {algorithm!r} is not {ALGORITHM}")
    parts: dict[str, str] = {}
    for item in rest.split(","):
        key, sep, value = item.strip().partition("=")
        if sep:
            parts[key] = value
    access_key, signature = parts.get("Credential", ""), parts.get("Signature", "")
    if not access_key or not signature:
        raise AuthenticationError("authorization header lacks Credential or Signature")
    date_time = metadata.get(DATE_TIME_HEADER, "")
    try:
        signed_at = datetime.strptime(date_time, DATE_FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise AuthenticationError(
            f"{DATE_TIME_HEADER} {date_time!r} is not yyyyMMddTHHmmssZ") from None
    if abs(now - signed_at) > tolerance_s:
        raise AuthenticationError(
            f"{DATE_TIME_HEADER} {date_time} is more than {tolerance_s:g} s from the "
            "broker's clock")
    user = _known(users, access_key)
    if not hmac.compare_digest(grpc_signature(user.password, date_time), signature.lower()):
        raise AuthenticationError(f"signature of user {access_key!r} does not match")
    return user


def remoting_content(fields: Mapping[str, str], body: bytes) -> bytes:
    signed = b"".join(fields[k].encode() for k in sorted(fields) if k != SIGNATURE)
    return signed + body


def remoting_signature(secret: str, fields: Mapping[str, str], body: bytes) -> str:
    mac = hmac.new(secret.encode(), remoting_content(fields, body), hashlib.sha1)
    return base64.b64encode(mac.digest()).decode()


def sign_remoting(fields: dict[str, str], body: bytes, access_key: str, secret: str) -> None:
    """Add ``AccessKey`` and ``Signature`` to a request's ext fields, in place."""
    fields.pop(SIGNATURE, None)
    fields[ACCESS_KEY] = access_key
    fields[SIGNATURE] = remoting_signature(secret, fields, body)


def verify_remoting(fields: Mapping[str, str], body: bytes, users: Users) -> User:
    access_key = fields.get(ACCESS_KEY)
    signature = fields.get(SIGNATURE)
    if not access_key or not signature:
        raise AuthenticationError("the request carries no AccessKey and Signature")
    user = _known(users, access_key)
    expected = remoting_signature(user.password, fields, body)
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        raise AuthenticationError(f"signature of user {access_key!r} does not match")
    return user
