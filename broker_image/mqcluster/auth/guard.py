"""One request's check: who sent it (authentication), may they (authorization).

The front ends call ``authenticate_*`` once at their entry and ``authorize`` with the
rights of ``table``; a ``Denied`` carries whether the caller was unknown or refused.
The users and policies are asked of ``acl`` on every request, so a re-read file
takes effect on the next one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from mqcluster.auth.credentials import Credentials
from mqcluster.auth.evaluator import Evaluator
from mqcluster.auth.model import AclConfig, User, UserType
from mqcluster.auth.signature import (
    DEFAULT_TOLERANCE_S,
    AuthenticationError,
    verify_grpc,
    verify_remoting,
)
from mqcluster.auth.table import Right


class Denied(Exception):
    """``authenticated`` False: the caller is unknown (gRPC UNAUTHORIZED); True: known
    but without the right (FORBIDDEN)."""

    def __init__(self, message: str, *, authenticated: bool) -> None:
        super().__init__(message)
        self.authenticated = authenticated


@dataclass
class Guard:
    authentication: bool
    authorization: bool
    acl: Callable[[], AclConfig]
    init_user: Credentials | None = None
    inner: Credentials | None = None
    tolerance_s: float = DEFAULT_TOLERANCE_S

    @property
    def enabled(self) -> bool:
        return self.authentication or self.authorization

    def user(self, access_key: str) -> User | None:
        # the bootstrap and inner users are Super and cannot be shadowed by the file
        for creds in (self.inner, self.init_user):
            if creds is not None and creds.access_key == access_key:
                return User(creds.access_key, creds.secret_key, UserType.SUPER)
        return self.acl().users.get(access_key)

    def authenticate_grpc(self, metadata: Mapping[str, str], now: float) -> User | None:
        """The caller, None when authentication is off and no credentials came."""
        if not self.authentication and not (self.authorization and "authorization" in metadata):
            return None
        try:
            return verify_grpc(metadata, self.user, now, self.tolerance_s)
        except AuthenticationError as exc:
            raise Denied(f"authentication failed: {exc}", authenticated=False) from None

    def authenticate_remoting(self, fields: Mapping[str, str], body: bytes) -> User | None:
        if not self.authentication and not (self.authorization and "AccessKey" in fields):
            return None
        try:
            return verify_remoting(fields, body, self.user)
        except AuthenticationError as exc:
            raise Denied(f"authentication failed: {exc}", authenticated=False) from None

    def authorize(self, user: User | None, rights: Iterable[Right], source: str | None) -> None:
        if not self.authorization:
            return
        if user is None:
            raise Denied("authorization needs an authenticated user: the request carries "
                         "no credentials", authenticated=False)
        if user.user_type is UserType.SUPER:
            return
        evaluator = Evaluator(self.acl())
        for right in rights:
            refusal = ""
            for action in right.actions:
                verdict = evaluator.check(user, right.kind, right.name, action, source)
                if verdict.allowed:
                    break
                refusal = refusal or verdict.message
            else:
                raise Denied(refusal, authenticated=True)
